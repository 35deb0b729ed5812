"""hilsim microbench."""
