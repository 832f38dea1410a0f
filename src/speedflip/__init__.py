"""speedflip: fast, dependable reinforcement learning for Rocket League bots on RocketSim."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from speedflip.faces import RocketLeagueGymEnv, RocketLeagueParallelEnv

__version__ = "0.1.0"


def gym_env(
    preset: str = "1v1",
    opponent: str = "rule",
    action_space: str = "discrete",
    env: dict[str, Any] | None = None,
    deterministic_opponent: bool = False,
) -> RocketLeagueGymEnv:
    """A single-agent ``gymnasium.Env``: the agent drives blue car 0, ``opponent`` every other car.

    ``opponent``: ``rule``, ``idle``, ``random`` or a run directory / checkpoint; ``action_space``:
    ``discrete`` (lookup-table index) or ``continuous`` (``Box(8)`` controls, clamped); ``env``:
    overrides of the preset's ``env`` section. See :mod:`speedflip.faces`.
    """
    from speedflip.faces import gym_env as make

    return make(preset, opponent, action_space, env, deterministic_opponent)


def parallel_env(
    preset: str = "2v2", action_space: str = "discrete", env: dict[str, Any] | None = None
) -> RocketLeagueParallelEnv:
    """A PettingZoo ``ParallelEnv`` over every car of one arena (needs ``pip install 'speedflip[faces]'``)."""
    from speedflip.faces import parallel_env as make

    return make(preset, action_space, env)
