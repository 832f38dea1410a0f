"""Learners for Gymnasium vector envs: PPO, recurrent PPO and DQN behind one small interface.

Each learner owns its vector env, networks, optimizer and counters; :meth:`GymLearner.iterate`
collects experience and updates once (a PPO rollout, or ``gym.log_interval_steps`` DQN steps) and
returns a flat metrics record. PPO uses :func:`speedflip.algos.ppo.compute_gae` and
:func:`speedflip.algos.ppo.ppo_update`, the same code as the Rocket League trainer.

``run.amp`` and ``run.compile`` apply to every learner (see :mod:`speedflip.accel`): every optimizer
step goes through a :class:`~speedflip.accel.GradientStep` (float16 autocast + GradScaler on CUDA
with ``run.amp``; NaN/Inf steps skipped and counted), and ``run.compile`` compiles the PPO policy and
critic MLPs and the DQN Q-network (and its target), falling back to eager mode with a note. What
was done is in :attr:`GymLearner.accel_notes`, printed in the run summary.
"""

from __future__ import annotations

import copy
import os
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from speedflip import __version__
from speedflip._types import Array
from speedflip.accel import compile_networks, make_gradient_step
from speedflip.algos.dqn import ReplayBuffer, dqn_update, epsilon_at, epsilon_greedy, update_target
from speedflip.algos.normalize import ReturnNormalizer, RunningMeanStd
from speedflip.algos.ppo import Batch, compute_gae, ppo_update
from speedflip.algos.ppo_recurrent import SequenceRollout, recurrent_ppo_update
from speedflip.checkpoint import (
    Checkpoint,
    from_numpy_dict,
    load_checkpoint,
    optimizer_from_tensors,
    optimizer_to_tensors,
    to_numpy_dict,
)
from speedflip.config import Config, config_to_dict
from speedflip.device import default_torch_threads, resolve_device
from speedflip.gym.envs import SpaceInfo, encode_obs, final_observations, make_vec_env, space_info
from speedflip.gym.errors import GymEnvError
from speedflip.models.activation import set_activation
from speedflip.models.mlp import ActorCritic
from speedflip.models.q import QNetwork
from speedflip.models.recurrent import RecurrentActorCritic

EVAL_EPSILON = 0.05
"""DQN's exploration rate when evaluated with ``--stochastic``."""


# ---------------------------------------------------------------------- policies (acting only)
class Policy(Protocol):
    """Acts on a batch of encoded observations; ``starts`` marks the first step of an episode."""

    def reset(self, num_envs: int) -> None: ...

    def act(self, obs: Array, starts: Array, deterministic: bool) -> Array: ...


class FeedForwardPolicy:
    """A feed-forward actor-critic with (frozen) observation normalization."""

    def __init__(self, model: ActorCritic, obs_rms: RunningMeanStd | None, device: torch.device) -> None:
        self.model, self.obs_rms, self.device = model, obs_rms, device

    def reset(self, num_envs: int) -> None:
        return None

    @torch.no_grad()
    def act(self, obs: Array, starts: Array, deterministic: bool) -> Array:
        x = self.obs_rms.normalize(obs) if self.obs_rms is not None else obs
        actions, _, _ = self.model.act(torch.as_tensor(x, device=self.device), deterministic=deterministic)
        out: Array = actions.cpu().numpy()
        return out


class RecurrentPolicy:
    """A recurrent actor-critic carrying one state row per env, zeroed where ``starts``."""

    def __init__(self, model: RecurrentActorCritic, obs_rms: RunningMeanStd | None, device: torch.device) -> None:
        self.model, self.obs_rms, self.device = model, obs_rms, device
        self.state = model.initial_state(1, device)

    def reset(self, num_envs: int) -> None:
        self.state = self.model.initial_state(num_envs, self.device)

    @torch.no_grad()
    def act(self, obs: Array, starts: Array, deterministic: bool) -> Array:
        x = self.obs_rms.normalize(obs) if self.obs_rms is not None else obs
        actions, _, _, self.state = self.model.act(
            torch.as_tensor(x, device=self.device),
            self.state,
            torch.as_tensor(starts, device=self.device),
            deterministic=deterministic,
        )
        out: Array = actions.cpu().numpy()
        return out


class QPolicy:
    """Greedy in Q (deterministic) or epsilon-greedy with :data:`EVAL_EPSILON` (stochastic)."""

    def __init__(self, q_net: torch.nn.Module, device: torch.device, seed: int = 0) -> None:
        self.q_net, self.device = q_net, device
        self.rng = np.random.default_rng(seed)

    def reset(self, num_envs: int) -> None:
        return None

    @torch.no_grad()
    def act(self, obs: Array, starts: Array, deterministic: bool) -> Array:
        q = self.q_net(torch.as_tensor(obs, device=self.device))
        return epsilon_greedy(q, 0.0 if deterministic else EVAL_EPSILON, self.rng)


# ---------------------------------------------------------------------- models from a config
def build_model(cfg: Config, info: SpaceInfo) -> torch.nn.Module:
    """The network ``cfg.algo`` trains, sized for the env's spaces, with ``gym.activation`` between layers."""
    model: torch.nn.Module
    if cfg.algo == "dqn":
        model = QNetwork(info.obs_dim, info.num_actions, cfg.dqn.q_layers)
    elif cfg.algo == "ppo_recurrent":
        r = cfg.recurrent
        model = RecurrentActorCritic(
            info.obs_dim, info.num_actions, r.cell, r.hidden_size, r.num_layers, r.encoder_layers, r.head_layers
        )
    else:
        model = ActorCritic(info.obs_dim, info.num_actions, cfg.ppo.policy_layers, cfg.ppo.critic_layers)
    return set_activation(model, cfg.gym.activation)


def compat_for(cfg: Config, info: SpaceInfo) -> dict[str, Any]:
    """What must match for a checkpoint of a gym run to load into the current config."""
    network: dict[str, Any]
    if cfg.algo == "dqn":
        network = {"q_layers": list(cfg.dqn.q_layers)}
    elif cfg.algo == "ppo_recurrent":
        network = cfg.recurrent.model_dump(exclude={"sequence_length"})
    else:
        network = {"policy_layers": list(cfg.ppo.policy_layers), "critic_layers": list(cfg.ppo.critic_layers)}
    return {
        "env_id": cfg.gym.env_id,
        "algo": cfg.algo,
        "obs_dim": info.obs_dim,
        "num_actions": info.num_actions,
        "network": {**network, "activation": cfg.gym.activation},
    }


def policy_from_checkpoint(cfg: Config, info: SpaceInfo, ckpt: Checkpoint, device: torch.device) -> Policy:
    """An acting-only policy from a saved gym checkpoint."""
    model = build_model(cfg, info).to(device)
    model.load_state_dict({k: v.to(device) for k, v in ckpt.model.items()})
    model.eval()
    obs_rms: RunningMeanStd | None = None
    if cfg.algo != "dqn" and cfg.ppo.normalize_obs:
        obs_rms = RunningMeanStd((info.obs_dim,))
        obs_rms.load_state_dict(to_numpy_dict(ckpt.state_tensors, "obs_rms."))
    if isinstance(model, QNetwork):
        return QPolicy(model, device, cfg.run.seed)
    if isinstance(model, RecurrentActorCritic):
        return RecurrentPolicy(model, obs_rms, device)
    assert isinstance(model, ActorCritic)
    return FeedForwardPolicy(model, obs_rms, device)


def make_adam(model: torch.nn.Module, lr: float, eps: float) -> torch.optim.Adam:
    """Adam with the fused kernel where this torch has it (about 15% more steps/s on CartPole), else the default."""
    try:
        return torch.optim.Adam(model.parameters(), lr=lr, eps=eps, fused=True)
    except (RuntimeError, TypeError, ValueError):  # older torch or an unsupported device
        return torch.optim.Adam(model.parameters(), lr=lr, eps=eps)


# ---------------------------------------------------------------------- the common part
@dataclass
class EpisodeTracker:
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


class GymLearner(ABC):
    """Shared state and plumbing of the gym learners (env, device, RNGs, counters, checkpoints)."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer

    def __init__(self, cfg: Config) -> None:
        if cfg.gym.env_id is None:
            raise ValueError("a gym learner needs gym.env_id")
        self.cfg = cfg
        self.env_id: str = cfg.gym.env_id
        torch.set_num_threads(cfg.run.torch_threads or default_torch_threads(os.cpu_count() or 1))
        torch.manual_seed(cfg.run.seed)
        self.device_choice = resolve_device(cfg.run.device)
        self.device = self.device_choice.device
        self.env = make_vec_env(self.env_id, cfg.gym.num_envs, cfg.gym.env_kwargs)
        self.num_envs = cfg.gym.num_envs
        try:
            self.info = space_info(
                self.env.single_observation_space, self.env.single_action_space, self.env_id, cfg.algo
            )
        except GymEnvError:
            self.env.close()
            raise
        self.rng = np.random.default_rng(cfg.run.seed)
        self.grad_step = make_gradient_step(self.device, cfg.run.amp)
        self.accel_notes: list[str] = list(self.grad_step.notes)  # what run.amp / run.compile did, for the summary
        self.generator = torch.Generator().manual_seed(cfg.run.seed + 1)
        self.global_step = 0
        self.iteration = 0
        self.episodes = EpisodeTracker(self.num_envs)
        self.compat = compat_for(cfg, self.info)
        self._reset_env(cfg.run.seed)

    def _reset_env(self, seed: int) -> None:
        raw, _ = self.env.reset(seed=seed)
        self.obs = encode_obs(raw, self.info)
        self.starts = np.ones(self.num_envs, bool)  # every env starts an episode
        self.episodes = EpisodeTracker(self.num_envs)

    def _example_obs(self) -> torch.Tensor:
        """A batch of observations shaped like the training envs' (for ``torch.compile``'s first run)."""
        return torch.zeros(self.num_envs, self.info.obs_dim, device=self.device)

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
        self.global_step += self.num_envs
        return np.asarray(rewards, np.float32), terminated, truncated, final

    @abstractmethod
    def iterate(self) -> dict[str, Any]:
        """Collect and update once; returns the metrics record of this iteration."""

    @abstractmethod
    def policy(self) -> Policy:
        """The current policy for evaluation (shares the live networks)."""

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def _base_record(self, seconds: float, steps: int) -> dict[str, Any]:
        returns, lengths = self.episodes.drain()
        return {
            "global_step": self.global_step,
            "iteration": self.iteration,
            "sps": steps / max(seconds, 1e-9),
            "charts/episode_reward_mean": float(np.mean(returns)) if returns else None,
            "charts/episode_length": float(np.mean(lengths)) if lengths else None,
            "charts/episodes": len(returns),
            "perf/sps": steps / max(seconds, 1e-9),
        }

    # ------------------------------------------------------------------ checkpoints
    def _extra_state(self) -> dict[str, torch.Tensor]:
        return {}

    def _extra_meta(self) -> dict[str, Any]:
        return {}

    def to_checkpoint(self, extra_meta: dict[str, Any] | None = None) -> Checkpoint:
        opt_tensors, opt_meta = optimizer_to_tensors(self.optimizer.state_dict())
        state = {"rng.torch": torch.get_rng_state(), "rng.generator": self.generator.get_state(), **self._extra_state()}
        meta = {
            "iteration": self.iteration,
            "compat": self.compat,
            "numpy_rng": self.rng.bit_generator.state,
            "algo": self.cfg.algo,
            "env_id": self.env_id,
            "summary": {
                "device": str(self.device),
                "envs": self.num_envs,
                "obs_dim": self.info.obs_dim,
                "actions": self.info.num_actions,
                "parameters": self.num_parameters(),
            },
            "config": config_to_dict(self.cfg),
            "owner": self.cfg.run.owner,
            "speedflip_version": __version__,
            "torch_version": torch.__version__,
            **self._extra_meta(),
            **(extra_meta or {}),
        }
        model_state = {k: v.detach().cpu().contiguous() for k, v in self.model.state_dict().items()}
        return Checkpoint(model_state, opt_tensors, opt_meta, state, meta)

    def load(self, path: Path) -> Checkpoint:
        """Restore weights, optimizer, normalizers, RNGs and counters from a checkpoint folder.

        Environments cannot be saved: they restart from fresh episodes (seeded from the step).
        """
        ckpt = load_checkpoint(Path(path))
        self.model.load_state_dict({k: v.to(self.device) for k, v in ckpt.model.items()})
        self.optimizer.load_state_dict(optimizer_from_tensors(ckpt.optimizer_tensors, ckpt.optimizer_meta))
        torch.set_rng_state(ckpt.state_tensors["rng.torch"])
        self.generator.set_state(ckpt.state_tensors["rng.generator"])
        self.rng.bit_generator.state = ckpt.meta["numpy_rng"]
        self.global_step = int(ckpt.meta["global_step"])
        self.iteration = int(ckpt.meta["iteration"])
        self._reset_env(self.cfg.run.seed + self.global_step)
        self._load_extra(ckpt)
        return ckpt

    def _load_extra(self, ckpt: Checkpoint) -> None:
        return None

    def close(self) -> None:
        self.env.close()


# ---------------------------------------------------------------------- PPO
class _PPOCommon(GymLearner):
    """Observation and return normalization and the learning-rate schedule shared by both PPOs."""

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        self.obs_rms = RunningMeanStd((self.info.obs_dim,))
        self.return_norm = ReturnNormalizer(self.num_envs, cfg.ppo.gamma)

    def _normalize(self, obs: Array) -> Array:
        return self.obs_rms.normalize(obs) if self.cfg.ppo.normalize_obs else obs

    def _rewards(self, rewards: Array, done: Array) -> Array:
        return self.return_norm(rewards, done) if self.cfg.ppo.normalize_rewards else rewards

    def learning_rate(self) -> float:
        ppo = self.cfg.ppo
        if not ppo.anneal_lr:
            return ppo.learning_rate
        return ppo.learning_rate * max(0.0, 1.0 - self.global_step / self.cfg.run.total_steps)

    def _set_lr(self) -> float:
        lr = self.learning_rate()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def _record(self, metrics: dict[str, float], collect_s: float, learn_s: float, steps: int) -> dict[str, Any]:
        record = self._base_record(collect_s + learn_s, steps)
        for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm",
                    "explained_variance"):  # fmt: skip
            record[f"losses/{key}"] = metrics.get(key)
        record["losses/nonfinite_minibatches"] = metrics.get("nonfinite_minibatches")
        record["charts/learning_rate"] = metrics.get("learning_rate")
        record["perf/collect_seconds"] = collect_s
        record["perf/learn_seconds"] = learn_s
        return record

    def _extra_state(self) -> dict[str, torch.Tensor]:
        return {
            **from_numpy_dict(self.obs_rms.state_dict(), "obs_rms."),
            **from_numpy_dict(self.return_norm.rms.state_dict(), "ret_rms."),
            "ret.returns": torch.from_numpy(self.return_norm.returns.copy()),
        }

    def _load_extra(self, ckpt: Checkpoint) -> None:
        self.obs_rms.load_state_dict(to_numpy_dict(ckpt.state_tensors, "obs_rms."))
        self.return_norm.rms.load_state_dict(to_numpy_dict(ckpt.state_tensors, "ret_rms."))
        # episodes restart on resume, so the running discounted returns restart at zero too


class PPOLearner(_PPOCommon):
    """Feed-forward PPO on a Gymnasium vector env."""

    model: ActorCritic

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        model = build_model(cfg, self.info)
        assert isinstance(model, ActorCritic)
        self.model = model.to(self.device)
        self.optimizer = make_adam(self.model, cfg.ppo.learning_rate, eps=1e-5)
        if cfg.run.compile:
            networks: dict[str, torch.nn.Module] = {"policy": self.model.policy, "critic": self.model.critic}
            self.model.compiled.update(compile_networks(networks, self._example_obs(), self.accel_notes))

    def policy(self) -> Policy:
        return FeedForwardPolicy(self.model, self.obs_rms if self.cfg.ppo.normalize_obs else None, self.device)

    @torch.no_grad()
    def collect(self) -> tuple[Batch, Array]:
        """``num_steps`` steps of every env -> the flattened batch (with GAE) and the raw observations."""
        T, N, D = self.cfg.ppo.num_steps, self.num_envs, self.info.obs_dim
        raw_obs = np.zeros((T, N, D), np.float32)
        obs_buf = np.zeros((T, N, D), np.float32)
        actions = np.zeros((T, N), np.int64)
        log_probs = np.zeros((T, N), np.float32)
        values = np.zeros((T, N), np.float32)
        rewards = np.zeros((T, N), np.float32)
        terminated = np.zeros((T, N), bool)
        truncated = np.zeros((T, N), bool)
        truncation_values = np.zeros((T, N), np.float32)
        for t in range(T):
            raw_obs[t] = self.obs
            obs_buf[t] = self._normalize(self.obs)
            action, log_prob, value = self.model.act(self._tensor(obs_buf[t]))
            actions[t], log_probs[t], values[t] = action.cpu().numpy(), log_prob.cpu().numpy(), value.cpu().numpy()
            step_rewards, terminated[t], truncated[t], final = self._step(actions[t])
            rewards[t] = self._rewards(step_rewards, terminated[t] | truncated[t])
            if truncated[t].any():
                rows = np.flatnonzero(truncated[t])
                truncation_values[t, rows] = self.model.value(self._tensor(self._normalize(final[rows]))).cpu().numpy()
        last_values = self.model.value(self._tensor(self._normalize(self.obs))).cpu().numpy()
        advantages, returns = compute_gae(
            rewards, values, terminated, truncated, truncation_values, last_values,
            self.cfg.ppo.gamma, self.cfg.ppo.gae_lambda,
        )  # fmt: skip
        batch = Batch(
            obs=self._tensor(obs_buf.reshape(T * N, D)),
            actions=self._tensor(actions.reshape(-1)),
            log_probs=self._tensor(log_probs.reshape(-1)),
            values=self._tensor(values.reshape(-1)),
            advantages=self._tensor(advantages.reshape(-1)),
            returns=self._tensor(returns.reshape(-1)),
        )
        return batch, raw_obs

    def iterate(self) -> dict[str, Any]:
        start = time.perf_counter()
        batch, raw_obs = self.collect()
        collect_s = time.perf_counter() - start
        lr = self._set_lr()
        metrics = ppo_update(self.model, self.optimizer, batch, self.cfg.ppo, self.generator, self.grad_step)
        metrics["learning_rate"] = lr
        if self.cfg.ppo.normalize_obs:
            self.obs_rms.update(raw_obs.reshape(-1, raw_obs.shape[-1]))
        self.iteration += 1
        return self._record(metrics, collect_s, time.perf_counter() - start - collect_s, len(batch))


class RecurrentPPOLearner(_PPOCommon):
    """Recurrent PPO (LSTM/GRU) on a Gymnasium vector env; one recurrent state row per env."""

    model: RecurrentActorCritic

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        model = build_model(cfg, self.info)
        assert isinstance(model, RecurrentActorCritic)
        self.model = model.to(self.device)
        self.optimizer = make_adam(self.model, cfg.ppo.learning_rate, eps=1e-5)
        self.state = self.model.initial_state(self.num_envs, self.device)
        if cfg.run.compile:
            self.accel_notes.append(
                "torch.compile: not applied to the recurrent model (LSTM/GRU core); running eagerly"
            )

    def _load_extra(self, ckpt: Checkpoint) -> None:
        super()._load_extra(ckpt)
        self.state = self.model.initial_state(self.num_envs, self.device)  # the envs restarted

    def policy(self) -> Policy:
        return RecurrentPolicy(self.model, self.obs_rms if self.cfg.ppo.normalize_obs else None, self.device)

    @torch.no_grad()
    def collect(self) -> tuple[SequenceRollout, Array]:
        """``num_steps`` steps of every env, storing the state at every sequence start."""
        T, N, D, L = self.cfg.ppo.num_steps, self.num_envs, self.info.obs_dim, self.cfg.recurrent.sequence_length
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
        states = torch.zeros(T // L, *self.state.shape, device=self.device)
        for t in range(T):
            if t % L == 0:
                states[t // L] = self.state
            raw_obs[t] = self.obs
            obs_buf[t] = self._normalize(self.obs)
            starts[t] = self.starts
            action, log_prob, value, self.state = self.model.act(
                self._tensor(obs_buf[t]), self.state, self._tensor(starts[t])
            )
            actions[t], log_probs[t], values[t] = action.cpu().numpy(), log_prob.cpu().numpy(), value.cpu().numpy()
            step_rewards, terminated[t], truncated[t], final = self._step(actions[t])
            rewards[t] = self._rewards(step_rewards, terminated[t] | truncated[t])
            if truncated[t].any():
                # V(final obs) continues the episode's memory: the state after acting on step t
                rows = np.flatnonzero(truncated[t])
                v = self.model.value(self._tensor(self._normalize(final)), self.state, torch.zeros(N, dtype=torch.bool))
                truncation_values[t, rows] = v.cpu().numpy()[rows]
        last_values = (
            self.model.value(self._tensor(self._normalize(self.obs)), self.state, self._tensor(self.starts))
            .cpu()
            .numpy()
        )
        advantages, returns = compute_gae(
            rewards, values, terminated, truncated, truncation_values, last_values,
            self.cfg.ppo.gamma, self.cfg.ppo.gae_lambda,
        )  # fmt: skip
        rollout = SequenceRollout(
            obs=self._tensor(obs_buf), actions=self._tensor(actions), log_probs=self._tensor(log_probs),
            values=self._tensor(values), advantages=self._tensor(advantages), returns=self._tensor(returns),
            starts=self._tensor(starts), states=states,
        )  # fmt: skip
        return rollout, raw_obs

    def iterate(self) -> dict[str, Any]:
        start = time.perf_counter()
        rollout, raw_obs = self.collect()
        collect_s = time.perf_counter() - start
        lr = self._set_lr()
        metrics = recurrent_ppo_update(
            self.model, self.optimizer, rollout, self.cfg.ppo, self.cfg.recurrent.sequence_length, self.generator,
            self.grad_step,
        )  # fmt: skip
        metrics["learning_rate"] = lr
        if self.cfg.ppo.normalize_obs:
            self.obs_rms.update(raw_obs.reshape(-1, raw_obs.shape[-1]))
        self.iteration += 1
        steps = int(rollout.actions.numel())
        return self._record(metrics, collect_s, time.perf_counter() - start - collect_s, steps)


# ---------------------------------------------------------------------- DQN
class DQNLearner(GymLearner):
    """DQN (optionally double) with a replay buffer and a target network; see :mod:`speedflip.algos.dqn`."""

    model: QNetwork

    def __init__(self, cfg: Config) -> None:
        super().__init__(cfg)
        d = cfg.dqn
        model = build_model(cfg, self.info)
        assert isinstance(model, QNetwork)
        self.model = model.to(self.device)
        self.target = copy.deepcopy(self.model)
        self.target.requires_grad_(False)
        self.optimizer = make_adam(self.model, d.learning_rate, eps=1e-8)
        # The networks as called (compiled wrappers sharing the parameters with run.compile); self.model and
        # self.target stay the plain modules, so state dicts and checkpoints are the same either way.
        self.q_net: torch.nn.Module = self.model
        self.target_net: torch.nn.Module = self.target
        if cfg.run.compile:
            networks: dict[str, torch.nn.Module] = {"q": self.model, "target": self.target}
            compiled = compile_networks(networks, self._example_obs(), self.accel_notes)
            self.q_net, self.target_net = compiled["q"], compiled["target"]
        self.nonfinite_steps = 0  # gradient steps skipped because the loss or gradients were NaN/Inf
        self.replay = ReplayBuffer(d.buffer_size, self.info.obs_dim)
        self.since_train = 0  # agent steps since the last training round (counted after learning_starts)
        self.since_target = 0  # agent steps since the last target update (counted after learning_starts)
        self.gradient_steps_done = 0

    @property
    def epsilon(self) -> float:
        return epsilon_at(self.global_step, self.cfg.dqn, self.cfg.run.total_steps)

    def policy(self) -> Policy:
        return QPolicy(self.q_net, self.device, self.cfg.run.seed)

    def step(self) -> list[dict[str, float]]:
        """One step of every env, then whatever training and target updates are due."""
        d = self.cfg.dqn
        with torch.no_grad():
            q = self.q_net(self._tensor(self.obs))
        actions = epsilon_greedy(q, self.epsilon, self.rng)
        obs = self.obs
        rewards, terminated, _, final = self._step(actions)
        self.replay.add(obs, actions, rewards, final, terminated)
        updates: list[dict[str, float]] = []
        if self.global_step <= d.learning_starts:
            return updates
        self.since_train += self.num_envs
        while self.since_train >= d.train_frequency:
            self.since_train -= d.train_frequency
            for _ in range(d.gradient_steps):
                sample = self.replay.sample(d.batch_size, self.rng, self.device)
                update = dqn_update(self.q_net, self.target_net, self.optimizer, sample, d, self.grad_step)
                self.nonfinite_steps += int(update["nonfinite_steps"])
                updates.append(update)
                self.gradient_steps_done += 1
        self.since_target += self.num_envs
        while self.since_target >= d.target_update_interval:
            self.since_target -= d.target_update_interval
            update_target(self.model, self.target, d.tau)
        return updates

    def iterate(self) -> dict[str, Any]:
        start = time.perf_counter()
        first = self.global_step
        updates: list[dict[str, float]] = []
        while (
            self.global_step - first < self.cfg.gym.log_interval_steps and self.global_step < self.cfg.run.total_steps
        ):
            updates += self.step()
        self.iteration += 1
        record = self._base_record(time.perf_counter() - start, self.global_step - first)
        applied = [u for u in updates if not u["nonfinite_steps"]]
        for key in ("td_loss", "q_values", "grad_norm"):
            record[f"losses/{key}"] = float(np.mean([u[key] for u in applied])) if applied else None
        record["losses/nonfinite_steps"] = len(updates) - len(applied)
        record["charts/epsilon"] = self.epsilon
        record["charts/replay_size"] = len(self.replay)
        record["charts/gradient_steps"] = self.gradient_steps_done
        return record

    def _extra_state(self) -> dict[str, torch.Tensor]:
        target = {f"target.{k}": v.detach().cpu().contiguous() for k, v in self.target.state_dict().items()}
        replay = self.replay.state_dict(with_contents=self.cfg.dqn.save_replay)
        return {**target, **from_numpy_dict(replay, "replay.")}

    def _extra_meta(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "replay_pos": self.replay.pos,
            "replay_size": len(self.replay),
            "replay_saved": self.cfg.dqn.save_replay,
            "since_train": self.since_train,
            "since_target": self.since_target,
            "gradient_steps": self.gradient_steps_done,
        }

    def _load_extra(self, ckpt: Checkpoint) -> None:
        target = {
            k[len("target.") :]: v.to(self.device) for k, v in ckpt.state_tensors.items() if k.startswith("target.")
        }
        self.target.load_state_dict(target)
        self.replay.load_state_dict(to_numpy_dict(ckpt.state_tensors, "replay."))
        self.since_train = int(ckpt.meta.get("since_train", 0))
        self.since_target = int(ckpt.meta.get("since_target", 0))
        self.gradient_steps_done = int(ckpt.meta.get("gradient_steps", 0))


def make_learner(cfg: Config) -> GymLearner:
    """The learner for ``cfg.algo`` on ``cfg.gym.env_id``."""
    if cfg.algo == "dqn":
        return DQNLearner(cfg)
    if cfg.algo == "ppo_recurrent":
        return RecurrentPPOLearner(cfg)
    return PPOLearner(cfg)
