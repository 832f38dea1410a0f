"""Errors of the replay tools (a light module: the command line imports it at start)."""

from __future__ import annotations


class ReplayError(ValueError):
    """A replay file that cannot be read or a recording request that cannot be honoured."""
