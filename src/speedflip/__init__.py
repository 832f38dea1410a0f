"""speedflip: fast, dependable reinforcement learning for Rocket League bots on RocketSim."""

__version__ = "0.1.0"
