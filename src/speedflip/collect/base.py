"""The interface every collection backend offers (the in-process env already has it)."""

from __future__ import annotations

from typing import Any, Protocol

from speedflip._types import Array
from speedflip.env.actions import LookupTableAction
from speedflip.env.vec_env import StepResult


class VecEnv(Protocol):
    """K arenas, every car an agent: ``reset()`` then ``step(actions)`` with one index per agent.

    Implemented by :class:`speedflip.env.vec_env.RocketLeagueVecEnv` (in-process, physics threads)
    and :class:`speedflip.collect.multiprocess.MultiProcessVecEnv` (worker processes).
    """

    num_arenas: int
    num_cars: int
    num_agents: int
    obs_dim: int
    num_actions: int
    actions: LookupTableAction

    @property
    def worker_restarts(self) -> int:
        """Collection workers restarted after a failure so far (always 0 without worker processes); a rollout
        during which it changed holds cut episodes and should be discarded."""
        ...

    @property
    def total_touches(self) -> int: ...

    @property
    def total_agent_seconds(self) -> float: ...

    @property
    def total_goals(self) -> int: ...

    def reset(self) -> Array: ...

    def step(self, actions: Array) -> StepResult: ...

    def reward_means(self) -> dict[str, float]: ...

    def set_reward_weights(self, weights: dict[str, float]) -> None: ...

    def set_mechanics_active(self, active: bool) -> None: ...

    def get_rng_state(self) -> dict[str, Any]: ...

    def set_rng_state(self, state: dict[str, Any]) -> None: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...
