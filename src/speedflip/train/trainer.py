"""The training loop: collect a rollout -> GAE -> PPO update -> log -> checkpoint.

Self-play: every car of every arena is driven by the learning policy, one batched forward pass
for all agents per step, and all of their experience trains it.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import torch
import yaml

from speedflip import __version__
from speedflip._types import Array
from speedflip.algos.normalize import ReturnNormalizer, RunningMeanStd
from speedflip.algos.ppo import Batch, compute_gae, ppo_update
from speedflip.collect import make_vec_env
from speedflip.config import Config, config_to_dict
from speedflip.models.mlp import ActorCritic
from speedflip.train.checkpoint import (
    Checkpoint,
    from_numpy_dict,
    load_checkpoint,
    optimizer_from_tensors,
    optimizer_to_tensors,
    save_checkpoint,
    to_numpy_dict,
)
from speedflip.train.rundir import compat_signature


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when it is present and works, else CPU."""
    if name == "auto":
        if torch.cuda.is_available():
            try:
                torch.zeros(1, device="cuda")
                return torch.device("cuda")
            except RuntimeError:
                return torch.device("cpu")
        return torch.device("cpu")
    return torch.device(name)


def config_hash(cfg: Config) -> str:
    text = json.dumps(config_to_dict(cfg), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


@dataclass
class RolloutStats:
    collect_seconds: float
    steps: int
    touches_per_minute: float
    goals_per_minute: float
    episode_returns: list[float]
    episode_lengths: list[float]
    reward_means: dict[str, float]
    reward_per_step: float


class Trainer:
    """Owns the environment, the model, the optimizer, the normalizers and the counters."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        cores = os.cpu_count() or 1
        torch.set_num_threads(cfg.run.torch_threads or cores)
        torch.manual_seed(cfg.run.seed)
        self.device = resolve_device(cfg.run.device)
        self.env = make_vec_env(cfg, seed=cfg.run.seed)
        self.model = ActorCritic(
            self.env.obs_dim, self.env.num_actions, cfg.ppo.policy_layers, cfg.ppo.critic_layers
        ).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.ppo.learning_rate, eps=1e-5)
        self.generator = torch.Generator().manual_seed(cfg.run.seed + 1)
        self.obs_rms = RunningMeanStd((self.env.obs_dim,))
        self.return_norm = ReturnNormalizer(self.env.num_agents, cfg.ppo.gamma)
        self.global_step = 0
        self.iteration = 0
        self.obs = self.env.reset()
        self.compat = compat_signature(
            self.env.obs_dim, self.env.num_actions, cfg.ppo.policy_layers, cfg.ppo.critic_layers
        )

    # ------------------------------------------------------------------ helpers
    def _normalize(self, obs: Array) -> Array:
        return self.obs_rms.normalize(obs) if self.cfg.ppo.normalize_obs else obs

    def _tensor(self, array: Array) -> torch.Tensor:
        return torch.as_tensor(array, device=self.device)

    def learning_rate(self) -> float:
        if not self.cfg.ppo.anneal_lr:
            return self.cfg.ppo.learning_rate
        frac = max(0.0, 1.0 - self.global_step / self.cfg.run.total_steps)
        return self.cfg.ppo.learning_rate * frac

    # ------------------------------------------------------------------ collect
    @torch.no_grad()
    def collect(self) -> tuple[Batch, Array, RolloutStats]:
        """Run ``num_steps`` steps in every arena; returns the batch, the raw observations and stats."""
        T, N, D = self.cfg.ppo.num_steps, self.env.num_agents, self.env.obs_dim
        raw_obs = np.zeros((T, N, D), np.float32)
        obs_buf = np.zeros((T, N, D), np.float32)
        actions = np.zeros((T, N), np.int64)
        log_probs = np.zeros((T, N), np.float32)
        values = np.zeros((T, N), np.float32)
        rewards = np.zeros((T, N), np.float32)
        terminated = np.zeros((T, N), bool)
        truncated = np.zeros((T, N), bool)
        truncation_values = np.zeros((T, N), np.float32)
        episode_returns: list[float] = []
        episode_lengths: list[float] = []
        touches0, seconds0, goals0 = (
            self.env.total_touches,
            self.env.total_agent_seconds,
            self.env.total_goals,
        )
        reward_sums: dict[str, float] = {}
        raw_reward_sum = 0.0
        start = time.perf_counter()
        for t in range(T):
            raw_obs[t] = self.obs
            obs_buf[t] = self._normalize(self.obs)
            action, log_prob, value = self.model.act(self._tensor(obs_buf[t]))
            actions[t] = action.cpu().numpy()
            log_probs[t] = log_prob.cpu().numpy()
            values[t] = value.cpu().numpy()
            result = self.env.step(actions[t])
            raw_reward_sum += float(result.rewards.mean())
            for name, mean in self.env.reward_means().items():
                reward_sums[name] = reward_sums.get(name, 0.0) + mean
            terminated[t], truncated[t] = result.terminated, result.truncated
            done = result.terminated | result.truncated
            if self.cfg.ppo.normalize_rewards:
                rewards[t] = self.return_norm(result.rewards, done)
            else:
                rewards[t] = result.rewards
            if result.truncated.any():
                rows = np.flatnonzero(result.truncated)
                final = self._tensor(self._normalize(result.final_obs[rows]))
                truncation_values[t, rows] = self.model.value(final).cpu().numpy()
            for episode in result.episodes:
                episode_returns.append(episode["return"])
                episode_lengths.append(episode["length_seconds"])
            self.obs = result.obs
        last_values = self.model.value(self._tensor(self._normalize(self.obs))).cpu().numpy()
        advantages, returns = compute_gae(
            rewards, values, terminated, truncated, truncation_values, last_values,
            self.cfg.ppo.gamma, self.cfg.ppo.gae_lambda,
        )  # fmt: skip
        collect_seconds = time.perf_counter() - start
        self.global_step += T * N
        game_minutes = max(self.env.total_agent_seconds - seconds0, 1e-9) / 60.0
        stats = RolloutStats(
            collect_seconds=collect_seconds,
            steps=T * N,
            touches_per_minute=(self.env.total_touches - touches0) / game_minutes,
            goals_per_minute=(self.env.total_goals - goals0) * self.env.num_cars / game_minutes,
            episode_returns=episode_returns,
            episode_lengths=episode_lengths,
            reward_means={k: v / T for k, v in reward_sums.items()},
            reward_per_step=raw_reward_sum / T,
        )
        batch = Batch(
            obs=self._tensor(obs_buf.reshape(T * N, D)),
            actions=self._tensor(actions.reshape(-1)),
            log_probs=self._tensor(log_probs.reshape(-1)),
            values=self._tensor(values.reshape(-1)),
            advantages=self._tensor(advantages.reshape(-1)),
            returns=self._tensor(returns.reshape(-1)),
        )
        return batch, raw_obs, stats

    # ------------------------------------------------------------------ update
    def update(self, batch: Batch, raw_obs: Array | None = None) -> dict[str, float]:
        """One PPO update on ``batch``; then fold the rollout's raw observations into the normalizer."""
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate()
        metrics = ppo_update(self.model, self.optimizer, batch, self.cfg.ppo, self.generator)
        if raw_obs is not None and self.cfg.ppo.normalize_obs:
            self.obs_rms.update(raw_obs.reshape(-1, raw_obs.shape[-1]))
        self.iteration += 1
        metrics["learning_rate"] = self.learning_rate()
        return metrics

    # ------------------------------------------------------------------ checkpoints
    def to_checkpoint(self, extra_meta: dict[str, Any] | None = None) -> Checkpoint:
        opt_tensors, opt_meta = optimizer_to_tensors(self.optimizer.state_dict())
        state = {
            **from_numpy_dict(self.obs_rms.state_dict(), "obs_rms."),
            **from_numpy_dict(self.return_norm.rms.state_dict(), "ret_rms."),
            "ret.returns": torch.from_numpy(self.return_norm.returns.copy()),
            "rng.torch": torch.get_rng_state(),
            "rng.generator": self.generator.get_state(),
        }
        meta = {
            "iteration": self.iteration,
            "compat": self.compat,
            "numpy_rng": self.env.get_rng_state(),
            "num_agents": self.env.num_agents,
            "config": config_to_dict(self.cfg),
            "config_hash": config_hash(self.cfg),
            "owner": self.cfg.run.owner,
            "git_commit": git_commit(),
            "speedflip_version": __version__,
            "torch_version": torch.__version__,
            **(extra_meta or {}),
        }
        model_state = {k: v.detach().cpu().contiguous() for k, v in self.model.state_dict().items()}
        return Checkpoint(model_state, opt_tensors, opt_meta, state, meta)

    def save(self, checkpoints_dir: Path, extra_meta: dict[str, Any] | None = None) -> Path:
        return save_checkpoint(
            checkpoints_dir, self.global_step, self.to_checkpoint(extra_meta), self.cfg.run.keep_checkpoints
        )

    def load(self, path: Path) -> None:
        ckpt = load_checkpoint(path)
        self.model.load_state_dict({k: v.to(self.device) for k, v in ckpt.model.items()})
        self.optimizer.load_state_dict(optimizer_from_tensors(ckpt.optimizer_tensors, ckpt.optimizer_meta))
        self.obs_rms.load_state_dict(to_numpy_dict(ckpt.state_tensors, "obs_rms."))
        self.return_norm.rms.load_state_dict(to_numpy_dict(ckpt.state_tensors, "ret_rms."))
        returns = ckpt.state_tensors["ret.returns"].numpy()
        if returns.shape == self.return_norm.returns.shape:
            self.return_norm.returns = returns.astype(np.float64).copy()
        torch.set_rng_state(ckpt.state_tensors["rng.torch"])
        self.generator.set_state(ckpt.state_tensors["rng.generator"])
        self.env.set_rng_state(ckpt.meta["numpy_rng"])
        self.global_step = int(ckpt.meta["global_step"])
        self.iteration = int(ckpt.meta["iteration"])

    def close(self) -> None:
        self.env.close()


class StopFlag:
    """SIGINT/SIGTERM set a flag so the loop saves and exits; a second signal exits at once."""

    def __init__(self) -> None:
        self.requested = False
        self.signal_name = ""
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self.signal_name = signal.Signals(signum).name

    def __enter__(self) -> StopFlag:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def write_resolved_config(cfg: Config, run_dir: Path) -> None:
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config_to_dict(cfg), sort_keys=False))


def summarize_iteration(
    trainer: Trainer,
    stats: RolloutStats,
    metrics: dict[str, float],
    learn_seconds: float,
    wall_seconds: float,
) -> dict[str, Any]:
    """One flat record per iteration for JSONL, TensorBoard and the console."""
    total_seconds = stats.collect_seconds + learn_seconds
    record: dict[str, Any] = {
        "global_step": trainer.global_step,
        "iteration": trainer.iteration,
        "sps": stats.steps / max(total_seconds, 1e-9),
        "wall_seconds": wall_seconds,
        "charts/episode_reward_mean": float(np.mean(stats.episode_returns)) if stats.episode_returns else None,
        "charts/episode_length_seconds": float(np.mean(stats.episode_lengths)) if stats.episode_lengths else None,
        "charts/episodes": len(stats.episode_returns),
        "charts/touches_per_minute": stats.touches_per_minute,
        "charts/goals_per_minute": stats.goals_per_minute,
        "charts/reward_per_step": stats.reward_per_step,
        "perf/sps": stats.steps / max(total_seconds, 1e-9),
        "perf/collect_sps": stats.steps / max(stats.collect_seconds, 1e-9),
        "perf/learn_sps": stats.steps / max(learn_seconds, 1e-9),
        "perf/collect_seconds": stats.collect_seconds,
        "perf/learn_seconds": learn_seconds,
    }
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm",
                "explained_variance"):  # fmt: skip
        record[f"losses/{key}"] = metrics.get(key)
    record["charts/learning_rate"] = metrics.get("learning_rate")
    for name, mean in stats.reward_means.items():
        record[f"rewards/{name}"] = mean
    return record


ProgressFn = Callable[[dict[str, Any]], None]
