"""Pipelined collection: the arenas split into groups of worker processes, so the parent acts for one group
while the workers of the other simulate (``run.collector: pipelined``).

With one pool of worker processes (``multiprocess``) the workers wait while the parent runs inference, the rule
bot and the rollout's bookkeeping, and the parent waits while they step. With two groups the waits overlap:

    parent:   act A(t) | act B(t)   | act A(t+1) | act B(t+1) ...
    group A:           | step A(t)  |            | step A(t+1)
    group B:                        | step B(t)  |

:class:`PipelinedVecEnv` owns the groups; every group is a :class:`MultiProcessVecEnv` whose arenas carry their
global indices (``arena_offset``), so arena ``k`` draws its resets from the stream ``[seed, k]`` exactly as in
process or in one pool of workers: the same seed and actions give the same trajectories (tests). As a plain
:class:`~speedflip.collect.base.VecEnv` (``step`` of all agents) it steps the groups together; the
:class:`~speedflip.collect.arena_collector.ArenaCollector` drives the groups one after the other through
:attr:`groups` and their ``step_async`` / ``step_wait``.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from speedflip._types import Array
from speedflip.collect.multiprocess import MultiProcessVecEnv
from speedflip.config import EnvConfig
from speedflip.env.arenas import GameArrays
from speedflip.env.vec_env import StepResult


def group_spans(num_arenas: int, num_groups: int) -> list[tuple[int, int]]:
    """Contiguous arena ranges ``[k0, k1)`` of ``num_groups`` groups, sizes differing by at most one."""
    if num_groups < 1 or num_arenas < num_groups:
        raise ValueError(f"{num_arenas} arenas cannot be split into {num_groups} groups of at least one arena")
    bounds = np.linspace(0, num_arenas, num_groups + 1).astype(int)
    return [(int(a), int(b)) for a, b in itertools.pairwise(bounds)]


class PipelinedVecEnv:
    """``num_groups`` groups of worker processes over contiguous shares of ``cfg.num_arenas`` arenas.

    Args:
        cfg: the environment; ``cfg.num_arenas`` is the total over all groups (at least ``num_groups``).
        seed: reset seed (arena ``k`` uses the stream ``[seed, k]``, as the other backends do).
        workers_per_group: worker processes in every group (at most one per arena of the group).
        num_groups: groups stepped in turn (2: one simulates while the parent acts for the other).
        threads_per_worker, timeout, max_worker_restarts, restart_window_seconds: as for
            :class:`MultiProcessVecEnv`, per group.
    """

    def __init__(
        self,
        cfg: EnvConfig,
        seed: int = 0,
        workers_per_group: int = 1,
        num_groups: int = 2,
        threads_per_worker: int = 1,
        timeout: float = 60.0,
        max_worker_restarts: int = 5,
        restart_window_seconds: float = 600.0,
    ) -> None:
        self.cfg = cfg
        self.spans = group_spans(cfg.num_arenas, num_groups)
        self.groups: list[MultiProcessVecEnv] = []
        try:
            for k0, k1 in self.spans:
                self.groups.append(
                    MultiProcessVecEnv(
                        cfg.model_copy(update={"num_arenas": k1 - k0}), seed=seed, num_workers=workers_per_group,
                        threads_per_worker=threads_per_worker, timeout=timeout,
                        max_worker_restarts=max_worker_restarts, restart_window_seconds=restart_window_seconds,
                        arena_offset=k0,
                    )
                )  # fmt: skip
        except BaseException:
            self.close()
            raise
        first = self.groups[0]
        self.num_arenas = cfg.num_arenas
        self.num_cars = first.num_cars
        self.num_agents = self.num_arenas * self.num_cars
        self.obs_dim = first.obs_dim
        self.num_actions = first.num_actions
        self.actions = first.actions
        self.workers_per_group = first.num_workers

    @property
    def worker_restarts(self) -> int:
        """Workers restarted so far, all groups."""
        return sum(g.worker_restarts for g in self.groups)

    @property
    def total_touches(self) -> int:
        return sum(g.total_touches for g in self.groups)

    @property
    def total_agent_seconds(self) -> float:
        return sum(g.total_agent_seconds for g in self.groups)

    @property
    def total_goals(self) -> int:
        return sum(g.total_goals for g in self.groups)

    @property
    def pids(self) -> list[int | None]:
        return [pid for g in self.groups for pid in g.pids]

    @property
    def state(self) -> GameArrays:
        """Every arena's state after the last step, concatenated (a copy; the collector reads each group's)."""
        states = [g.state for g in self.groups]
        return GameArrays(
            np.concatenate([s.ball for s in states]),
            np.concatenate([s.cars for s in states]),
            np.concatenate([s.pads for s in states]),
            np.concatenate([s.scores for s in states]),
        )

    def reset(self) -> Array:
        """Start a new episode in every arena; returns observations ``[N, obs_dim]``."""
        return np.concatenate([g.reset() for g in self.groups])

    def step(self, actions: Array) -> StepResult:
        """One decision for every agent: every group's step started, then every one awaited."""
        C = self.num_cars
        for g, (k0, k1) in zip(self.groups, self.spans, strict=True):
            g.step_async(np.asarray(actions)[k0 * C : k1 * C])
        return join_results([g.step_wait() for g in self.groups])

    def settle(self) -> None:
        """Wait for any step still running (after an interruption), so other commands may be sent."""
        for g in self.groups:
            if g.pending:
                g.step_wait()

    def group_reward_means(self, index: int) -> dict[str, float]:
        """Group ``index``'s reward-component means in its last step, times its share of the arenas (the groups'
        sum to :meth:`reward_means`)."""
        k0, k1 = self.spans[index]
        share = (k1 - k0) / self.num_arenas
        return {name: mean * share for name, mean in self.groups[index].reward_means().items()}

    def reward_means(self) -> dict[str, float]:
        """Mean of every reward component over all agents in the last step (groups weighted by arenas)."""
        sums: dict[str, float] = {}
        for index in range(len(self.groups)):
            for name, mean in self.group_reward_means(index).items():
                sums[name] = sums.get(name, 0.0) + mean
        return sums

    def get_rng_state(self) -> dict[str, Any]:
        """Every arena's reset stream, in the in-process env's format (arena offset 0)."""
        arenas: list[Any] = []
        for g in self.groups:
            arenas.extend(g.get_rng_state()["arenas"])
        return {"format": "per-arena-v1", "arena_offset": 0, "arenas": arenas}

    def set_rng_state(self, state: dict[str, Any]) -> None:
        """Restore streams saved by any backend's ``get_rng_state`` (every arena takes its global index's)."""
        for g in self.groups:
            g.set_rng_state(state)

    def set_reward_weights(self, weights: dict[str, float]) -> None:
        for g in self.groups:
            g.set_reward_weights(weights)

    def set_mechanics_active(self, active: bool) -> None:
        for g in self.groups:
            g.set_mechanics_active(active)

    def describe(self) -> dict[str, Any]:
        """A summary for the start-of-run table."""
        info = self.groups[0].describe()
        first = self.groups[0]
        info.update(
            arenas=self.num_arenas,
            agents=self.num_agents,
            collector=f"pipelined ({len(self.groups)} groups x {first.num_workers} workers x "
            f"{first.threads_per_worker} physics threads, {first.start_method})",
        )
        return info

    def close(self) -> None:
        for g in self.groups:
            g.close()


def join_results(results: list[StepResult]) -> StepResult:
    """The step results of consecutive groups as one (rows in group order)."""
    goal_teams = [r.goal_team for r in results]
    return StepResult(
        obs=np.concatenate([r.obs for r in results]),
        rewards=np.concatenate([r.rewards for r in results]),
        terminated=np.concatenate([r.terminated for r in results]),
        truncated=np.concatenate([r.truncated for r in results]),
        final_obs=np.concatenate([r.final_obs for r in results]),
        episodes=[e for r in results for e in r.episodes],
        goal_team=None if any(g is None for g in goal_teams) else np.concatenate(goal_teams),  # type: ignore[arg-type]
    )
