"""hilsim.cli: the command layer (one module per command; ``main`` holds the group)."""
