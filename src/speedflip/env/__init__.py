"""The Rocket League environment on RocketSim, vectorized over arenas."""
