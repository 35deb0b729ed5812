"""GPGPU-Sim: build, configure and run the cycle-level simulator (the simulated card)."""
