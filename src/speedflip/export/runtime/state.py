"""The state arrays the observation builders read (the bundle's stand-in for ``speedflip.env.arenas``)."""

from __future__ import annotations

from dataclasses import dataclass

from speedflip._types import Array


@dataclass
class GameArrays:
    """Arrays in RocketSim's gym-state layout; axis ``p`` is the perspective (0 blue, 1 orange).

    ``ball [K, 2, 25]``, ``cars [K, C, 2, 36]`` (blue cars first), ``pads [K, 2, 34]`` (1 = active),
    ``scores [K, 2]``.
    """

    ball: Array
    cars: Array
    pads: Array
    scores: Array
