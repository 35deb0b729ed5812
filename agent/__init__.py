"""hilsim agent."""
