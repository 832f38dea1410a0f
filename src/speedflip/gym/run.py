"""``speedflip train --env gym:<id>``: the Gymnasium session the one run loop (:mod:`speedflip.train.loop`) drives.

A :class:`GymSession` composes the same pieces as a Rocket League run: a learner from
:mod:`speedflip.algos` (:class:`~speedflip.algos.ppo_learner.PPOLearner` for PPO and recurrent PPO,
:class:`~speedflip.algos.dqn_learner.DQNLearner` for DQN), the
:class:`~speedflip.collect.gym_collector.GymCollector` and the :mod:`speedflip.schedule`. The run loop
owns the lock, resume, summary, sinks, progress, checkpoints and signals. Between iterations the session
evaluates periodically on separate env copies and keeps ``checkpoints/best/`` (the checkpoint with the
highest mean evaluation return, replaced atomically when beaten); the final policy is always evaluated.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console

from speedflip.algos.dqn_learner import DQNLearner
from speedflip.algos.ppo_learner import LearnerState, PPOLearner
from speedflip.checkpoint import (
    Checkpoint,
    CheckpointError,
    load_checkpoint,
    make_checkpoint,
    optimizer_from_tensors,
    save_checkpoint,
    verify_checkpoint,
)
from speedflip.collect.gym_collector import GymCollector
from speedflip.config import Config
from speedflip.device import default_torch_threads, resolve_device
from speedflip.gym.agents import GymPolicy, compat_for, policy_for
from speedflip.gym.envs import SpaceInfo, make_gym_vec_env, space_info
from speedflip.gym.evaluate import EvalSummary, run_episodes, solved_threshold, summarize
from speedflip.models.build import build_policy_model, build_q_network
from speedflip.provenance import config_hash, git_commit
from speedflip.rollout import EpisodeStats
from speedflip.schedule import ent_coef, learning_rate
from speedflip.train import loop
from speedflip.train.warmstart import StartPoint

EVAL_SEED_OFFSET = 1_000_003
"""Evaluation env copies are seeded away from the training envs."""


def _fmt(value: Any, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def probe_spaces(cfg: Config) -> SpaceInfo:
    """The env's spaces as the learners see them; a bad env id or action space fails here (nothing built)."""
    assert cfg.gym.env_id is not None
    env = make_gym_vec_env(cfg.gym.env_id, 1, cfg.gym.env_kwargs)
    try:
        return space_info(env.single_observation_space, env.single_action_space, cfg.gym.env_id, cfg.algo)
    finally:
        env.close()


def train_gym(
    cfg: Config, run_dir: Path, new: bool = False, console: Console | None = None, start: StartPoint | None = None
) -> int:
    """Train (or resume) a Gymnasium run in ``run_dir`` through the one run loop; returns a process exit code.
    ``start`` (``--from``) starts the new run from another run's policy."""
    compat = compat_for(cfg, probe_spaces(cfg))  # before the run dir is touched

    def make_session(resolved: Path) -> GymSession:
        return GymSession(cfg, resolved)

    return loop.run(cfg, run_dir, compat, make_session, new, console, None, start)


class GymSession:
    """A Gymnasium run as :class:`speedflip.train.loop.Session` (usable without a run dir: no best/)."""

    title = "speedflip run (Gymnasium)"

    def __init__(self, cfg: Config, run_dir: Path | None = None) -> None:
        if cfg.gym.env_id is None:
            raise ValueError("a Gymnasium session needs gym.env_id")
        self.cfg = cfg
        self.env_id: str = cfg.gym.env_id
        self.run_dir = run_dir
        torch.set_num_threads(cfg.run.torch_threads or default_torch_threads(os.cpu_count() or 1))
        torch.manual_seed(cfg.run.seed)
        self.device_choice = resolve_device(cfg.run.device)
        self.device = self.device_choice.device
        self.collector = GymCollector(cfg, self.device)
        self.info = self.collector.info
        obs_dim, num_actions, activation = self.info.obs_dim, self.info.num_actions, cfg.gym.activation
        try:
            self.learner: PPOLearner | DQNLearner
            if cfg.algo == "dqn":
                q = build_q_network(cfg, obs_dim, num_actions, activation)
                self.learner = DQNLearner(cfg, q, self.device, obs_dim)
            else:
                model = build_policy_model(cfg, obs_dim, num_actions, activation=activation)
                self.learner = PPOLearner(cfg, model, self.device, obs_dim)
        except BaseException:
            self.collector.close()
            raise
        self.compat = compat_for(cfg, self.info)
        self.global_step = 0
        self.iteration = 0
        self.lineage: list[dict[str, Any]] = []  # where this run started (--from), oldest ancestor last
        self.start = time.perf_counter()
        self.clock = loop.TrainClock()  # training time, earlier sessions' included (a resume reads it)
        self.last_eval_step = -1
        self._schedule()

    # ------------------------------------------------------------------ parts
    @property
    def model(self) -> torch.nn.Module:
        return self.learner.model

    @property
    def accel_notes(self) -> list[str]:
        """What run.amp / run.compile did (the summary's "amp / compile" row)."""
        return self.learner.notes

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.learner.model.parameters())

    def policy(self) -> GymPolicy:
        """The current policy for evaluation (shares the learner's live networks)."""
        learner = self.learner
        if isinstance(learner, DQNLearner):
            return policy_for(learner.model, None, self.device, self.cfg.run.seed)
        rms = learner.obs_rms if self.cfg.ppo.normalize_obs else None
        return policy_for(learner.model, rms, self.device)

    def _schedule(self) -> None:
        every = self.cfg.gym.eval_interval_steps
        self.next_eval = (self.global_step // every + 1) * every if every else None
        self.best = best_score(self.run_dir / "checkpoints") if self.run_dir is not None else None
        solved = self.solved_return
        self.announced_solved = self.best is not None and solved is not None and self.best >= solved

    @property
    def solved_return(self) -> float | None:
        return solved_threshold(self.cfg.gym, self.env_id)

    # ------------------------------------------------------------------ one iteration
    def iterate(self) -> dict[str, Any]:
        """PPO: one rollout and one update; DQN: rollouts and updates for ``gym.log_interval_steps`` agent steps."""
        start = time.perf_counter()
        self.clock.start()
        if isinstance(self.learner, DQNLearner):
            record = self._iterate_dqn(self.learner, start)
        else:
            record = self._iterate_ppo(self.learner, start)
        self.iteration += 1
        record["iteration"] = self.iteration
        return record

    def _iterate_ppo(self, learner: PPOLearner, start: float) -> dict[str, Any]:
        rollout = self.collector.collect(learner.policy_weights(), self.global_step)
        self.global_step += rollout.stats.steps
        batch = learner.prepare(rollout)
        step, seconds = self.global_step, self.train_seconds()
        learner.set_hyperparameters(
            learning_rate(self.cfg, step, learner.learning_rate, seconds), ent_coef(self.cfg, step, seconds)
        )
        metrics = learner.update(batch, rollout.raw_obs, where=f"step {self.global_step:,}")
        collect_s = rollout.stats.collect_seconds
        record = self._base_record(rollout.stats, time.perf_counter() - start)
        for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm",
                    "explained_variance"):  # fmt: skip
            record[f"losses/{key}"] = metrics.get(key)
        record["losses/nonfinite_minibatches"] = metrics.get("nonfinite_minibatches")
        record["charts/learning_rate"] = metrics.get("learning_rate")
        record["perf/collect_seconds"] = collect_s
        record["perf/learn_seconds"] = time.perf_counter() - start - collect_s
        record["health/nonfinite_updates"] = learner.guard.total_bad_updates
        record["health/weight_restores"] = learner.guard.total_restores
        return record

    def _iterate_dqn(self, learner: DQNLearner, start: float) -> dict[str, Any]:
        cfg, n = self.cfg, self.collector.num_envs
        first = self.global_step
        stats = EpisodeStats(collect_seconds=0.0, steps=0)
        sums = {"td_loss": 0.0, "q_values": 0.0, "grad_norm": 0.0}
        applied = skipped = 0
        while self.global_step - first < cfg.gym.log_interval_steps and self.global_step < cfg.run.total_steps:
            left = min(cfg.gym.log_interval_steps - (self.global_step - first), cfg.run.total_steps - self.global_step)
            steps = min(learner.steps_until_training(n), -(-left // n))
            rollout = self.collector.collect(learner.policy_weights(), self.global_step, steps)
            self.global_step += rollout.stats.steps
            metrics = learner.update(rollout)
            stats.steps += rollout.stats.steps
            stats.collect_seconds += rollout.stats.collect_seconds
            stats.episode_returns += rollout.stats.episode_returns
            stats.episode_lengths += rollout.stats.episode_lengths
            count = int(metrics["applied_steps"])
            applied += count
            skipped += int(metrics["nonfinite_steps"])
            for key in sums:
                sums[key] += metrics[key] * count if count else 0.0
        record = self._base_record(stats, time.perf_counter() - start)
        for key, total in sums.items():
            record[f"losses/{key}"] = total / applied if applied else None
        record["losses/nonfinite_steps"] = skipped
        record["charts/epsilon"] = learner.epsilon
        record["charts/replay_size"] = len(learner.replay)
        record["charts/gradient_steps"] = learner.gradient_steps_done
        record["perf/collect_seconds"] = stats.collect_seconds
        record["perf/learn_seconds"] = time.perf_counter() - start - stats.collect_seconds
        return record

    def _base_record(self, stats: EpisodeStats, seconds: float) -> dict[str, Any]:
        sps = stats.steps / max(seconds, 1e-9)
        return {
            "global_step": self.global_step,
            "iteration": self.iteration,
            "sps": sps,
            "charts/episode_reward_mean": _mean(stats.episode_returns),
            "charts/episode_length": _mean(stats.episode_lengths),
            "charts/episodes": len(stats.episode_returns),
            "perf/sps": sps,
        }

    # ------------------------------------------------------------------ between iterations
    def between(self, record: dict[str, Any], console: Console) -> None:
        """Periodic evaluation (and the final policy's, once, at the end of the budget)."""
        if self.next_eval is None:
            return
        every = self.cfg.gym.eval_interval_steps
        if self.global_step >= self.next_eval:
            self._evaluate(record, console)
            self.next_eval = (self.global_step // every + 1) * every
        end = self.global_step >= self.cfg.run.total_steps or loop.time_budget_spent(self.cfg, self.train_seconds())
        if end and self.last_eval_step != self.global_step:
            self._evaluate(record, console)  # the final policy is always evaluated once

    def evaluate(self, episodes: int | None = None) -> EvalSummary:
        """Play ``gym.eval_episodes`` episodes with the current policy on fresh env copies (same seeds each time)."""
        cfg = self.cfg
        result = run_episodes(
            self.env_id, cfg.gym.env_kwargs, self.policy(), episodes or cfg.gym.eval_episodes,
            cfg.gym.eval_envs, cfg.run.seed + EVAL_SEED_OFFSET, cfg.gym.eval_deterministic,
        )  # fmt: skip
        return summarize(result, cfg.gym, self.env_id, cfg.gym.eval_deterministic)

    def _evaluate(self, record: dict[str, Any], console: Console) -> None:
        summary = self.evaluate()
        self.last_eval_step = self.global_step
        record.update(eval_record(summary))
        if self.best is None or summary.mean_return > self.best:
            self.best = summary.mean_return
            if self.run_dir is not None:
                meta = {"eval": eval_record_meta(summary), "reason": "best evaluation"}
                save_best(self.run_dir / "checkpoints", self.global_step, self.to_checkpoint(meta))
        record["eval/best_return"] = self.best
        solved = self.solved_return
        if solved is not None and summary.mean_return >= solved and not self.announced_solved:
            self.announced_solved = True
            record["eval/solved_step"] = self.global_step
            console.print(
                f"solved: mean return {summary.mean_return:.1f} >= {solved:g} at step {self.global_step:,} "
                f"({time.perf_counter() - self.start:.0f} s)",
                soft_wrap=True,
            )

    def progress_fields(self, record: dict[str, Any]) -> dict[str, str]:
        return {"reward": _fmt(record.get("charts/episode_reward_mean")), "extra": f"best eval {_fmt(self.best)}"}

    # ------------------------------------------------------------------ summary
    def notes(self) -> list[str]:
        return [self.device_choice.note] if self.device_choice.note else []

    def summary_rows(self, run_dir: Path, resumed_from: Path | None) -> list[tuple[str, str]]:
        cfg = self.cfg
        if cfg.algo == "dqn":
            d = cfg.dqn
            network = f"Q {d.q_layers}"
            schedule = (f"buffer {d.buffer_size:,}, batch {d.batch_size}, epsilon {d.start_epsilon:g} -> "
                        f"{d.end_epsilon:g} over {d.exploration_fraction:.0%}, learning starts {d.learning_starts:,}, "
                        f"train every {d.train_frequency} x {d.gradient_steps}, target every "
                        f"{d.target_update_interval} (tau {d.tau:g}){', double' if d.double_dqn else ''}")  # fmt: skip
        else:
            if cfg.algo == "ppo_recurrent":
                r = cfg.recurrent
                network = f"{r.cell.upper()} {r.num_layers}x{r.hidden_size}, encoder {r.encoder_layers}"
            else:
                network = f"policy {cfg.ppo.policy_layers}, critic {cfg.ppo.critic_layers}"
            schedule = (f"batch {cfg.batch_size:,} / minibatch {cfg.ppo.minibatch_size:,} x {cfg.ppo.update_epochs} "
                        f"epochs" + (f", sequences of {cfg.recurrent.sequence_length}"
                                     if cfg.algo == "ppo_recurrent" else ""))  # fmt: skip
        solved = self.solved_return
        notes = self.accel_notes
        return [
            ("run dir", str(run_dir)),
            ("resumed from", str(resumed_from) if resumed_from else "- (fresh start)"),
            ("env", f"{self.env_id} x {cfg.gym.num_envs} (obs {self.info.obs_dim}, {self.info.num_actions} actions)"),
            ("algorithm", f"{cfg.algo}: {schedule}"),
            ("network", f"{network}, {self.num_parameters():,} parameters"),
            ("device", self.device_choice.description),
            ("amp / compile", f"{'on' if cfg.run.amp else 'off'} / {'on' if cfg.run.compile else 'off'}"
                              + (f": {'; '.join(notes)}" if notes else "")),
            ("budget", loop.describe_budget(cfg)),
            ("evaluation", "off" if not cfg.gym.eval_interval_steps else
             f"every {cfg.gym.eval_interval_steps:,} steps, {cfg.gym.eval_episodes} episodes; solved at "
             f"{'-' if solved is None else format(solved, 'g')}"),
            ("owner / commit / config", f"{cfg.run.owner} / {git_commit() or '-'} / {config_hash(cfg)}"),
        ]  # fmt: skip

    def finish(self, console: Console, run_dir: Path) -> None:
        if self.best is not None:
            console.print(f"Best evaluation: mean return {self.best:.1f} (checkpoints/best)", soft_wrap=True)
        console.print(f"Evaluate with: speedflip eval {run_dir} --episodes 20", soft_wrap=True)

    def train_seconds(self) -> float:
        """Wall-clock seconds of training in this run so far, earlier sessions included."""
        return self.clock.seconds()

    # ------------------------------------------------------------------ checkpoints
    def to_checkpoint(self, extra_meta: dict[str, Any] | None = None) -> Checkpoint:
        """The checkpoint format of gym runs (tensor names and meta keys as before the trainer split)."""
        state = self.learner.state_dict()
        meta = {
            **state.meta,
            "iteration": self.iteration,
            "compat": self.compat,
            "numpy_rng": self.collector.rng_state(),
            "algo": self.cfg.algo,
            "env_id": self.env_id,
            "lineage": self.lineage,
            "train_seconds": self.train_seconds(),
            "summary": {
                "device": str(self.device),
                "envs": self.cfg.gym.num_envs,
                "obs_dim": self.info.obs_dim,
                "actions": self.info.num_actions,
                "parameters": self.num_parameters(),
            },
            **(extra_meta or {}),
        }
        return make_checkpoint(state.model, state.optimizer, state.tensors, self.cfg, meta)

    def save(self, checkpoints_dir: Path, meta: dict[str, Any]) -> Path:
        """A rolling checkpoint ``checkpoints/<step>`` (the newest ``run.keep_checkpoints`` are kept)."""
        return save_checkpoint(
            checkpoints_dir, self.global_step, self.to_checkpoint(meta), self.cfg.run.keep_checkpoints
        )

    def load(self, path: Path) -> None:
        """Restore weights, optimizer, normalizers, RNGs and counters from a checkpoint folder.

        Environments cannot be saved: they restart from fresh episodes (seeded from the step), and so do
        the recurrent memory and the running discounted returns of the reward scaling.
        """
        ckpt = load_checkpoint(Path(path))
        optimizer = optimizer_from_tensors(ckpt.optimizer_tensors, ckpt.optimizer_meta)
        self.learner.load_state_dict(LearnerState(ckpt.model, optimizer, ckpt.state_tensors, ckpt.meta))
        if isinstance(self.learner, PPOLearner):
            self.learner.return_norm.returns = np.zeros(0, np.float64)
        self.collector.set_rng_state(ckpt.meta["numpy_rng"])
        self.global_step = int(ckpt.meta["global_step"])
        self.iteration = int(ckpt.meta["iteration"])
        self.clock.before = float(ckpt.meta.get("train_seconds", 0.0))
        self.collector.reset(self.cfg.run.seed + self.global_step)
        self._schedule()
        lineage = ckpt.meta.get("lineage")
        self.lineage = lineage if isinstance(lineage, list) else []

    def start_from(self, start: StartPoint) -> None:
        """Warm start (``--from``): the policy of ``start.path``; with ``start.keep_step`` also the optimizer
        and the counters. The envs keep this run's seed; the replay buffer (DQN) starts empty."""
        ckpt = load_checkpoint(start.path)
        optimizer = optimizer_from_tensors(ckpt.optimizer_tensors, ckpt.optimizer_meta) if start.keep_step else {}
        self.learner.load_policy(LearnerState(ckpt.model, optimizer, ckpt.state_tensors, ckpt.meta), start.keep_step)
        if start.keep_step:
            self.global_step = int(ckpt.meta["global_step"])
            self.iteration = int(ckpt.meta["iteration"])
        self.lineage = start.lineage()
        self._schedule()

    def close(self) -> None:
        self.collector.close()


# ---------------------------------------------------------------------- best/ and evaluation records
def best_score(checkpoints_dir: Path) -> float | None:
    """Mean eval return stored in ``checkpoints/best`` (``None`` when there is no usable best)."""
    best = checkpoints_dir / "best"
    if not best.is_dir():
        return None
    try:
        meta = verify_checkpoint(best)
    except CheckpointError:
        return None
    score = meta.get("eval", {}).get("mean_return")
    return float(score) if isinstance(score, (int, float)) else None


def save_best(checkpoints_dir: Path, step: int, ckpt: Checkpoint) -> Path:
    """Write ``ckpt`` as ``checkpoints/best`` (written and verified beside it, then swapped in)."""
    staging = checkpoints_dir / ".best-staging"
    old = checkpoints_dir / ".best-old"
    shutil.rmtree(staging, ignore_errors=True)
    written = save_checkpoint(staging, step, ckpt, keep=1)
    best = checkpoints_dir / "best"
    shutil.rmtree(old, ignore_errors=True)
    if best.exists():
        best.rename(old)
    written.rename(best)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)
    return best


def eval_record(summary: EvalSummary) -> dict[str, Any]:
    return {
        "eval/mean_return": summary.mean_return,
        "eval/std_return": summary.std_return,
        "eval/mean_length": summary.mean_length,
        "eval/success_rate": summary.success_rate,
    }


def eval_record_meta(summary: EvalSummary) -> dict[str, Any]:
    return {
        "mean_return": summary.mean_return,
        "std_return": summary.std_return,
        "mean_length": summary.mean_length,
        "success_rate": summary.success_rate,
        "episodes": summary.episodes,
    }
