"""hilsim.core: the bottom layer."""
