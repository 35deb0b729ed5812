"""hilsim analyzer/importers."""
