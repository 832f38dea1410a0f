"""The Gymnasium collector: a vector env of any registered Gymnasium id behind ``collect(weights) -> Rollout``.

The same record as the Rocket League collector (:class:`~speedflip.collect.arena_collector.ArenaCollector`)
hands the learner: observations normalized with the acting weights' statistics and the raw ones,
actions, log-probabilities, values, raw rewards, episode ends, and ``V(final observation)`` where an
episode was truncated (same-step autoreset: the final observation comes from ``info``, see
:mod:`speedflip.gym.envs`). A recurrent policy keeps one state row per env, zeroed where an episode
starts, stored at every sequence start.

For DQN (``algo: dqn``) it collects epsilon-greedy transitions instead: the rollout's ``next_obs`` holds
the observation after every step (an ended episode's final one), and no log-probabilities or values.
Epsilon follows :func:`speedflip.algos.dqn.epsilon_at` of the agent step each env step is taken at.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from speedflip._types import Array
from speedflip.algos.dqn import epsilon_at, epsilon_greedy
from speedflip.algos.normalize import RunningMeanStd
from speedflip.algos.ppo_learner import load_weights
from speedflip.config import Config
from speedflip.gym.envs import SpaceInfo, encode_obs, final_observations, make_gym_vec_env, space_info
from speedflip.gym.errors import GymEnvError
from speedflip.models.build import build_policy_model, build_q_network
from speedflip.models.mlp import ActorCritic
from speedflip.models.q import QNetwork
from speedflip.models.recurrent import RecurrentActorCritic
from speedflip.rollout import EpisodeStats, PolicyWeights, Rollout


@dataclass
class ReturnTracker:
    """Per-env running return and length; finished episodes are collected until :meth:`drain`."""

    num_envs: int
    returns: Array = field(init=False)
    lengths: Array = field(init=False)
    finished_returns: list[float] = field(default_factory=list)
    finished_lengths: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.returns = np.zeros(self.num_envs, np.float64)
        self.lengths = np.zeros(self.num_envs, np.int64)

    def step(self, rewards: Array, done: Array) -> None:
        self.returns += rewards
        self.lengths += 1
        for i in np.flatnonzero(done):
            self.finished_returns.append(float(self.returns[i]))
            self.finished_lengths.append(int(self.lengths[i]))
        self.returns[done] = 0.0
        self.lengths[done] = 0

    def drain(self) -> tuple[list[float], list[int]]:
        out = (self.finished_returns, self.finished_lengths)
        self.finished_returns, self.finished_lengths = [], []
        return out


class GymCollector:
    """Collects rollouts from ``gym.num_envs`` copies of ``gym.env_id`` with an acting copy of the policy.

    Raises :class:`~speedflip.gym.errors.GymEnvError` (after closing the env) when the env's spaces do
    not suit ``cfg.algo``. The acting network is built without drawing from torch's global generator.
    """

    def __init__(self, cfg: Config, device: torch.device) -> None:
        if cfg.gym.env_id is None:
            raise ValueError("a Gymnasium collector needs gym.env_id")
        self.cfg = cfg
        self.env_id: str = cfg.gym.env_id
        self.device = device
        self.num_envs = cfg.gym.num_envs
        self.env = make_gym_vec_env(self.env_id, self.num_envs, cfg.gym.env_kwargs)
        try:
            self.info: SpaceInfo = space_info(
                self.env.single_observation_space, self.env.single_action_space, self.env_id, cfg.algo
            )
        except GymEnvError:
            self.env.close()
            raise
        self.dqn = cfg.algo == "dqn"
        info = self.info
        self.model: ActorCritic | RecurrentActorCritic | QNetwork
        with torch.random.fork_rng(devices=[]):
            if self.dqn:
                self.model = build_q_network(cfg, info.obs_dim, info.num_actions, cfg.gym.activation)
            else:
                self.model = build_policy_model(cfg, info.obs_dim, info.num_actions, activation=cfg.gym.activation)
        self.model = self.model.to(device)
        self.model.requires_grad_(False)
        self.obs_rms = RunningMeanStd((info.obs_dim,))
        self.normalize_obs = cfg.ppo.normalize_obs and not self.dqn
        self.rng = np.random.default_rng(cfg.run.seed)  # epsilon-greedy exploration
        self._loaded: PolicyWeights | None = None
        self.reset(cfg.run.seed)

    def reset(self, seed: int) -> None:
        """Fresh episodes in every env (seeded), a fresh recurrent state and episode tracker."""
        raw, _ = self.env.reset(seed=seed)
        self.obs = encode_obs(raw, self.info)
        self.starts = np.ones(self.num_envs, bool)  # every env starts an episode
        self.episodes = ReturnTracker(self.num_envs)
        self.state: torch.Tensor | None = None
        if isinstance(self.model, RecurrentActorCritic):
            self.state = self.model.initial_state(self.num_envs, self.device)

    def rng_state(self) -> dict[str, Any]:
        return dict(self.rng.bit_generator.state)

    def set_rng_state(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state

    # ------------------------------------------------------------------ collection
    def collect(self, weights: PolicyWeights, global_step: int = 0, num_steps: int | None = None) -> Rollout:
        """``num_steps`` steps of every env acted by ``weights``; ``global_step`` (agent steps so far) sets
        DQN's epsilon. Default length: ``ppo.num_steps``, or for DQN ``max(1, train_frequency // num_envs)``."""
        if weights is not self._loaded:  # DQN hands the same weights until it trains again
            load_weights(self.model, self.obs_rms, weights)
            self._loaded = weights
        if self.dqn:
            steps = num_steps or max(1, self.cfg.dqn.train_frequency // self.num_envs)
            rollout = self._transitions(steps, global_step)
        else:
            rollout = self._rollout(num_steps or self.cfg.ppo.num_steps)
        rollout.stats.policy_version = weights.version
        return rollout

    def _normalize(self, obs: Array) -> Array:
        return self.obs_rms.normalize(obs) if self.normalize_obs else obs

    def _tensor(self, array: Array) -> torch.Tensor:
        return torch.as_tensor(array, device=self.device)

    def _step(self, actions: Array) -> tuple[Array, Array, Array, Array]:
        """Step the vector env; returns ``(rewards, terminated, truncated, final_obs)`` (final = last obs)."""
        raw, rewards, terminated, truncated, info = self.env.step(actions)
        done = terminated | truncated
        final = encode_obs(final_observations(raw, info, done), self.info)
        self.episodes.step(rewards, done)
        self.obs = encode_obs(raw, self.info)
        self.starts = done.copy()
        return np.asarray(rewards, np.float32), terminated, truncated, final

    def _stats(self, start: float, T: int) -> EpisodeStats:
        returns, lengths = self.episodes.drain()
        return EpisodeStats(
            collect_seconds=time.perf_counter() - start,
            steps=T * self.num_envs,
            episode_returns=returns,
            episode_lengths=[float(n) for n in lengths],
        )

    @torch.no_grad()
    def _rollout(self, T: int) -> Rollout:
        """PPO: ``T`` steps of every env with log-probabilities, values and truncation bootstraps."""
        N, D, model = self.num_envs, self.info.obs_dim, self.model
        recurrent = isinstance(model, RecurrentActorCritic)
        L = self.cfg.recurrent.sequence_length if recurrent else 1
        raw_obs = np.zeros((T, N, D), np.float32)
        obs_buf = np.zeros((T, N, D), np.float32)
        starts = np.zeros((T, N), bool)
        actions = np.zeros((T, N), np.int64)
        log_probs = np.zeros((T, N), np.float32)
        values = np.zeros((T, N), np.float32)
        rewards = np.zeros((T, N), np.float32)
        terminated = np.zeros((T, N), bool)
        truncated = np.zeros((T, N), bool)
        truncation_values = np.zeros((T, N), np.float32)
        states = torch.zeros(T // L, *self.state.shape) if self.state is not None else None
        start = time.perf_counter()
        for t in range(T):
            raw_obs[t] = self.obs
            obs_buf[t] = self._normalize(self.obs)
            starts[t] = self.starts
            x = self._tensor(obs_buf[t])
            if isinstance(model, RecurrentActorCritic):
                assert self.state is not None and states is not None
                if t % L == 0:
                    states[t // L] = self.state.cpu()
                action, log_prob, value, self.state = model.act(x, self.state, self._tensor(starts[t]))
            else:
                assert isinstance(model, ActorCritic)
                action, log_prob, value = model.act(x)
            actions[t], log_probs[t], values[t] = action.cpu().numpy(), log_prob.cpu().numpy(), value.cpu().numpy()
            rewards[t], terminated[t], truncated[t], final = self._step(actions[t])
            if truncated[t].any():
                rows = np.flatnonzero(truncated[t])
                truncation_values[t, rows] = self._values(final[rows], rows)
        last = self._tensor(self._normalize(self.obs))
        if isinstance(model, RecurrentActorCritic):
            assert self.state is not None
            last_values = model.value(last, self.state, self._tensor(self.starts)).cpu().numpy()
        else:
            assert isinstance(model, ActorCritic)
            last_values = model.value(last).cpu().numpy()
        return Rollout(
            obs=obs_buf, raw_obs=raw_obs, actions=actions, log_probs=log_probs, values=values, rewards=rewards,
            terminated=terminated, truncated=truncated, truncation_values=truncation_values,
            last_values=last_values, stats=self._stats(start, T),
            starts=starts if recurrent else None, states=states,
        )  # fmt: skip

    def _values(self, final: Array, rows: Array) -> Array:
        """V(final observation) of the truncated ``rows``; a recurrent one continues the episode's memory
        (the state after acting on the step, without a reset)."""
        model, x = self.model, self._tensor(self._normalize(final))
        if isinstance(model, RecurrentActorCritic):
            assert self.state is not None
            index = self._tensor(rows)
            no_start = torch.zeros(len(rows), dtype=torch.bool, device=self.device)
            out: Array = model.value(x, self.state[:, index], no_start).cpu().numpy()
            return out
        assert isinstance(model, ActorCritic)
        values: Array = model.value(x).cpu().numpy()
        return values

    @torch.no_grad()
    def _transitions(self, T: int, global_step: int) -> Rollout:
        """DQN: ``T`` epsilon-greedy steps of every env, with the observation after each step."""
        N, D, model = self.num_envs, self.info.obs_dim, self.model
        assert isinstance(model, QNetwork)
        obs = np.zeros((T, N, D), np.float32)
        next_obs = np.zeros((T, N, D), np.float32)
        actions = np.zeros((T, N), np.int64)
        rewards = np.zeros((T, N), np.float32)
        terminated = np.zeros((T, N), bool)
        truncated = np.zeros((T, N), bool)
        start = time.perf_counter()
        for t in range(T):
            epsilon = epsilon_at(global_step + t * N, self.cfg.dqn, self.cfg.run.total_steps)
            obs[t] = self.obs
            actions[t] = epsilon_greedy(model(self._tensor(self.obs)), epsilon, self.rng)
            rewards[t], terminated[t], truncated[t], next_obs[t] = self._step(actions[t])
        zeros = np.zeros((T, N), np.float32)
        return Rollout(
            obs=obs, raw_obs=obs, actions=actions, log_probs=zeros, values=zeros, rewards=rewards,
            terminated=terminated, truncated=truncated, truncation_values=zeros,
            last_values=np.zeros(N, np.float32), stats=self._stats(start, T), next_obs=next_obs,
        )  # fmt: skip

    def close(self) -> None:
        self.env.close()
