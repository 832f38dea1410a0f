"""Errors of Gymnasium runs (kept free of heavy imports so the CLI can catch them cheaply)."""


class GymEnvError(ValueError):
    """A Gymnasium environment that cannot be used; the message says why and what to do."""
