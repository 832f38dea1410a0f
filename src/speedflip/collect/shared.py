"""Preallocated shared-memory arrays between the collector process and its workers.

One ``multiprocessing.shared_memory`` block holds every array of a step (actions in; observations,
rewards, done flags, finished-episode stats and counters out). The layout is a plain list of
``(name, dtype, shape, offset)`` tuples, computed once in the parent and handed to each worker at
start, so nothing is pickled per step: the parent writes actions, the workers write results in
place, and a one-byte message on a pipe says "go" and "done".

This module imports only numpy, the standard library and two small speedflip modules (the state layout
and the episode metric names) so a worker can load it cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from speedflip.env import layout as L
from speedflip.env.episodes import EPISODE_METRICS

ALIGN = 64  # bytes; every array starts on a cache line

COUNTER_FIELDS = ("total_touches", "total_agent_seconds", "total_goals")
# the keys of RocketLeagueVecEnv's finished-episode dicts: return, length and touch rate, then
# the episode metrics of speedflip.env.episodes (one list, so the two cannot drift apart)
EPISODE_FIELDS = ("return", "length_seconds", "touches_per_minute", "goal", *EPISODE_METRICS)

Layout = list[tuple[str, str, tuple[int, ...], int]]


def make_layout(
    num_agents: int, obs_dim: int, num_arenas: int, num_workers: int, num_rewards: int
) -> tuple[Layout, int]:
    """The arrays of one collector and their byte offsets; returns ``(layout, total_bytes)``.

    ``state_*`` are the arenas' state after the last step or reset (``GameArrays``: ball, cars, pads, scores),
    so the parent can run what reads it (the rule bot, the kickstart's labels, action masks)."""
    num_cars = num_agents // num_arenas
    specs: list[tuple[str, str, tuple[int, ...]]] = [
        ("actions", "int64", (num_agents,)),
        ("obs", "float32", (num_agents, obs_dim)),
        ("final_obs", "float32", (num_agents, obs_dim)),
        ("rewards", "float32", (num_agents,)),
        ("terminated", "bool", (num_agents,)),
        ("truncated", "bool", (num_agents,)),
        ("goal_team", "int64", (num_arenas,)),
        ("episode_done", "bool", (num_arenas,)),
        ("episode_stats", "float64", (num_arenas, len(EPISODE_FIELDS))),
        ("counters", "float64", (num_workers, len(COUNTER_FIELDS))),
        ("reward_means", "float64", (num_workers, max(num_rewards, 1))),
        ("reward_means_valid", "bool", (num_workers,)),
        ("state_ball", "float32", (num_arenas, 2, L.BALL_WIDTH)),
        ("state_cars", "float32", (num_arenas, num_cars, 2, L.CAR_WIDTH)),
        ("state_pads", "float32", (num_arenas, 2, L.NUM_BOOST_PADS)),
        ("state_scores", "int64", (num_arenas, 2)),
    ]
    layout: Layout = []
    offset = 0
    for name, dtype, shape in specs:
        layout.append((name, dtype, shape, offset))
        size = int(np.dtype(dtype).itemsize * int(np.prod(shape)))
        offset += (size + ALIGN - 1) // ALIGN * ALIGN
    return layout, max(offset, ALIGN)


@dataclass
class SharedArrays:
    """Numpy views onto one shared-memory block (see :func:`make_layout`)."""

    actions: np.ndarray[Any, Any]
    obs: np.ndarray[Any, Any]
    final_obs: np.ndarray[Any, Any]
    rewards: np.ndarray[Any, Any]
    terminated: np.ndarray[Any, Any]
    truncated: np.ndarray[Any, Any]
    goal_team: np.ndarray[Any, Any]
    episode_done: np.ndarray[Any, Any]
    episode_stats: np.ndarray[Any, Any]
    counters: np.ndarray[Any, Any]
    reward_means: np.ndarray[Any, Any]
    reward_means_valid: np.ndarray[Any, Any]
    state_ball: np.ndarray[Any, Any]
    state_cars: np.ndarray[Any, Any]
    state_pads: np.ndarray[Any, Any]
    state_scores: np.ndarray[Any, Any]

    @classmethod
    def view(cls, shm: shared_memory.SharedMemory, layout: Layout) -> SharedArrays:
        """Arrays over ``shm``'s buffer; they stay valid while ``shm`` is open."""
        arrays: dict[str, np.ndarray[Any, Any]] = {
            name: np.ndarray(shape, dtype=np.dtype(dtype), buffer=shm.buf, offset=offset)
            for name, dtype, shape, offset in layout
        }
        return cls(**arrays)
