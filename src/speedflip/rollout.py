"""What a collector hands the learner: the :class:`Rollout` record and the :class:`PolicyWeights` it acted with.

Neutral on purpose: numpy and torch only, nothing of the environment, the algorithms or the run.
Every collection backend (in-process arenas, worker processes, Gymnasium vector envs, remote actors)
fills the same record, so a learner never needs to know where its experience came from.

Shapes: ``T`` steps, ``N`` learning agents (rows), ``D`` observation size, ``A`` actions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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

    @property
    def num_steps(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def num_rows(self) -> int:
        return int(self.rewards.shape[1])

    @property
    def policy_version(self) -> int:
        return self.stats.policy_version
