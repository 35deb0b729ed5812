"""hilsim simmodel."""
