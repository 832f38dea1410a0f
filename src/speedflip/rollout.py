"""What a collector hands the learner: the :class:`Rollout` record and the :class:`PolicyWeights` it acted with.

Neutral on purpose: numpy and torch only, nothing of the environment, the algorithms or the run.
Every collection backend (in-process arenas, worker processes, Gymnasium vector envs, remote actors)
fills the same record, so a learner never needs to know where its experience came from.

Shapes: ``T`` steps, ``N`` learning agents (rows), ``D`` observation size, ``A`` actions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from speedflip._types import Array


@dataclass
class PolicyWeights:
    """A copy of the acting part of a learner: network weights and observation statistics, with a version.

    ``version`` counts the learner's updates; every rollout says which version acted, so a collector
    that runs behind the learner (overlap, remote actors) is visible and PPO's ratio corrects for it.
    """

    version: int
    model: dict[str, torch.Tensor]  # state dict of the acting network, on the CPU
    obs_rms: dict[str, Array] | None  # RunningMeanStd state; None when observations are not normalized


@dataclass(frozen=True)
class Mirror:
    """A symmetry of the game as index maps and signs: a rollout row's mirror is a row the game can produce.

    ``obs(x)[..., i] = x[..., obs_index[i]] * obs_sign[i]``; ``actions(a) = action_index[a]``. Applying either
    twice gives the input back. Rocket League's left-right mirror is built by :mod:`speedflip.env.mirror`;
    ``ppo.mirror_augment`` trains on every row and its mirror.
    """

    obs_index: Array  # int64 [D]
    obs_sign: Array  # float32 [D]
    action_index: Array  # int64 [A]

    def obs(self, x: Array) -> Array:
        """Observations ``[..., D]`` (raw or normalized by symmetric statistics) -> their mirrors."""
        out: Array = (x[..., self.obs_index] * self.obs_sign).astype(np.float32, copy=False)
        return out

    def obs_tensor(self, x: torch.Tensor) -> torch.Tensor:
        """:meth:`obs` on a tensor (on the tensor's device)."""
        index = torch.as_tensor(self.obs_index, device=x.device)
        return x[..., index] * torch.as_tensor(self.obs_sign, device=x.device, dtype=x.dtype)

    def actions_tensor(self, a: torch.Tensor) -> torch.Tensor:
        """Action indices -> the mirrored rows' indices (on the tensor's device)."""
        return torch.as_tensor(self.action_index, device=a.device)[a.long()].to(a.dtype)


@dataclass
class EpisodeStats:
    """What the finished episodes and the game clock of one rollout say (for metrics, not for training)."""

    collect_seconds: float
    steps: int
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[float] = field(default_factory=list)  # seconds (Rocket League) or steps (Gymnasium)
    touches_per_minute: float | None = None
    goals_per_minute: float | None = None
    reward_means: dict[str, float] = field(default_factory=dict)  # per reward component, per step
    reward_per_step: float | None = None
    episode_metrics: dict[str, float | None] = field(default_factory=dict)  # env.episodes.episode_means
    policy_version: int = 0  # the update count of the weights that acted in this rollout


@dataclass
class Rollout:
    """``T`` steps of ``N`` learning agents, as acted; raw rewards (the learner scales them).

    - ``obs``: the observations as the policy saw them (normalized with the acting statistics);
      ``raw_obs``: before normalization (the learner folds them into its statistics).
    - ``truncation_values[t, n]``: V(final observation) where step ``t`` of row ``n`` was truncated
      (a time limit), so GAE bootstraps there; ``last_values``: V(observation after step T-1).
    - Recurrent policies: ``starts[t, n]`` marks an episode's first step (the state was zeroed there);
      ``states[k]`` is the state ``[layers, N, S]`` before step ``k * sequence_length``.
    - Off-policy learners (DQN): ``next_obs[t, n]`` is the raw observation after step ``t``; where the
      episode of row ``n`` ended at step ``t`` it is that episode's *final* observation (not the first
      one of the next episode), so a replay buffer can bootstrap a truncated episode from it. An
      epsilon-greedy rollout has no log-probabilities or values: those fields hold zeros.
    - Kickstarting (``ppo.kickstart_coef``): ``teacher_actions[t, n]`` is the lookup-table row the rule bot
      would have chosen in the state row ``n`` acted on at step ``t``.
    """

    obs: Array  # [T, N, D] float32
    raw_obs: Array  # [T, N, D] float32
    actions: Array  # [T, N] int64 (table / discrete) or [T, N, C] (continuous float32, multi-discrete int64)
    log_probs: Array  # [T, N] float32, of the acting policy
    values: Array  # [T, N] float32
    rewards: Array  # [T, N] float32, raw
    terminated: Array  # [T, N] bool
    truncated: Array  # [T, N] bool
    truncation_values: Array  # [T, N] float32
    last_values: Array  # [N] float32
    stats: EpisodeStats
    masks: Array | None = None  # [T, N, A] bool action masks
    starts: Array | None = None  # [T, N] bool (recurrent)
    states: torch.Tensor | None = None  # [T // L, layers, N, S] (recurrent)
    next_obs: Array | None = None  # [T, N, D] float32, raw (off-policy learners)
    teacher_actions: Array | None = None  # [T, N] int64, the rule bot's row on the same state (ppo.kickstart_coef)

    @property
    def num_steps(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def num_rows(self) -> int:
        return int(self.rewards.shape[1])

    @property
    def policy_version(self) -> int:
        return self.stats.policy_version


def _weighted_mean(values: list[float | None], weights: list[int]) -> float | None:
    pairs = [(v, w) for v, w in zip(values, weights, strict=True) if v is not None]
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if pairs and total > 0 else None


def _mean_of(stats: list[EpisodeStats], name: str, steps: list[int]) -> float | None:
    return _weighted_mean([s.reward_means.get(name) for s in stats], steps)


def merge_rollouts(rollouts: list[Rollout]) -> Rollout:
    """Rollouts of the same ``T`` and policy version side by side: one rollout of all their rows.

    Arrays are joined along the row axis (recurrent states along theirs), episode lists are joined, and
    the per-step rates are averaged weighted by each rollout's agent steps. ``collect_seconds`` is the
    longest one's (they ran in parallel).
    """
    if not rollouts:
        raise ValueError("merge_rollouts needs at least one rollout")
    if len(rollouts) == 1:
        return rollouts[0]
    versions = {r.policy_version for r in rollouts}
    if len(versions) != 1 or len({r.num_steps for r in rollouts}) != 1:
        raise ValueError(f"rollouts of one length and one policy version only (versions {sorted(versions)})")

    def join(name: str) -> Array | None:
        """An optional ``[T, N, ...]`` field joined along the rows; None unless every rollout has it."""
        parts = [getattr(r, name) for r in rollouts]
        return None if any(p is None for p in parts) else np.concatenate(parts, axis=1)

    rows: dict[str, Array] = {
        name: np.concatenate([getattr(r, name) for r in rollouts], axis=1)
        for name in ("obs", "raw_obs", "actions", "log_probs", "values", "rewards", "terminated", "truncated",
                     "truncation_values")
    }  # fmt: skip
    steps = [r.stats.steps for r in rollouts]
    stats = [r.stats for r in rollouts]
    reward_names = dict.fromkeys(k for s in stats for k in s.reward_means)
    metric_names = dict.fromkeys(k for s in stats for k in s.episode_metrics)
    merged_stats = EpisodeStats(
        collect_seconds=max(s.collect_seconds for s in stats),
        steps=sum(steps),
        episode_returns=[v for s in stats for v in s.episode_returns],
        episode_lengths=[v for s in stats for v in s.episode_lengths],
        touches_per_minute=_weighted_mean([s.touches_per_minute for s in stats], steps),
        goals_per_minute=_weighted_mean([s.goals_per_minute for s in stats], steps),
        reward_means={k: v for k in reward_names if (v := _mean_of(stats, k, steps)) is not None},
        reward_per_step=_weighted_mean([s.reward_per_step for s in stats], steps),
        episode_metrics={k: _weighted_mean([s.episode_metrics.get(k) for s in stats], steps) for k in metric_names},
        policy_version=rollouts[0].policy_version,
    )
    states = [r.states for r in rollouts]
    return Rollout(
        **rows,
        last_values=np.concatenate([r.last_values for r in rollouts]),
        stats=merged_stats,
        masks=join("masks"),
        starts=join("starts"),
        states=None if any(s is None for s in states) else torch.cat([s for s in states if s is not None], dim=2),
        next_obs=join("next_obs"),
        teacher_actions=join("teacher_actions"),
    )
