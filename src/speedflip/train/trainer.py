"""The Rocket League training session: a :class:`~speedflip.algos.ppo_learner.PPOLearner`, an
:class:`~speedflip.collect.arena_collector.ArenaCollector` and the :mod:`speedflip.schedule`, wired.

One iteration: ``weights = learner.policy_weights()`` -> ``rollout = collector.collect(weights)`` ->
``batch = learner.prepare(rollout)`` -> ``learner.update(batch)``; between rollouts the schedule may
switch the reward phase or the curriculum stage (a new stage builds a new collector). The session
holds no algorithm and no environment code of its own: it owns the counters, the checkpoint format
and the overlap of collection with learning.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from speedflip._types import Array
from speedflip.algos.guards import TrainingDivergedError
from speedflip.algos.ppo_learner import LearnerState, PPOBatch, PPOLearner
from speedflip.checkpoint import Checkpoint, load_checkpoint, make_checkpoint, optimizer_from_tensors, save_checkpoint
from speedflip.collect.arena_collector import ArenaCollector
from speedflip.collect.base import VecEnv
from speedflip.config import Config
from speedflip.device import default_torch_threads, resolve_device, torch_threads
from speedflip.env.action_forms import table_for
from speedflip.env.mirror import env_mirror
from speedflip.models.build import HEAD_FOR_FORM, PolicyModel, build_policy_model, recurrent_spec
from speedflip.provenance import config_hash, git_commit
from speedflip.rollout import EpisodeStats
from speedflip.schedule import (
    ent_coef,
    kickstart_coef,
    learning_rate,
    mechanics_active,
    next_reward_phase,
    next_stage,
    reward_phase_name,
    stage_config,
    stage_name,
    stage_opponent_share,
)
from speedflip.selfplay.matchmaker import Matchmaker
from speedflip.train.evaluation import evaluate_vs_rule
from speedflip.train.rundir import compat_signature
from speedflip.train.signals import StopFlag

if TYPE_CHECKING:
    from speedflip.collect.ray_collector import RayCollector


RolloutStats = EpisodeStats  # the name this record had before the collector/learner split

__all__ = [
    "RolloutStats", "StopFlag", "Trainer", "TrainingDivergedError", "config_hash", "default_torch_threads",
    "git_commit", "stage_config", "stage_opponent_share", "summarize_iteration",
]  # fmt: skip


class Trainer:
    """A Rocket League run's learner, collector, schedule state and counters (see the module docstring)."""

    def __init__(self, cfg: Config, run_dir: Path | None = None) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        cores = os.cpu_count() or 1
        torch.set_num_threads(cfg.run.torch_threads or default_torch_threads(cores))
        # the update's large matrix products use every core; the small per-step forwards of collection
        # are fastest on fewer threads (docs/performance.md)
        self.update_threads = cfg.run.update_torch_threads or cores
        torch.manual_seed(cfg.run.seed)
        choice = resolve_device(cfg.run.device)
        self.device = choice.device
        self.notes: list[str] = [choice.note] if choice.note else []
        self.stage = 0
        self.reward_phase = 0
        self.global_step = 0
        # wall-clock seconds of training so far (the run session sets it): schedules over run.time_budget_minutes
        self.train_clock: Callable[[], float] = lambda: 0.0
        self.last_eval: dict[str, float | None] = {}
        self.lineage: list[dict[str, Any]] = []  # where this run started (--from), oldest ancestor last
        self.collector = self._new_collector()
        env = self.collector.env
        self.action_form = self.env_cfg.env.action_form
        # ppo.mirror_augment / mirror_coef: the field's left-right mirror (the obs layout is the same in every stage)
        mirror = None
        if cfg.ppo.uses_mirror:
            mirror = env_mirror(self.env_cfg.env, table_for(self.env_cfg.env).table)
        model = self._build_model(env.obs_dim, env.num_actions)
        self.learner = PPOLearner(cfg, model, self.device, env.obs_dim, mirror)
        self.notes += self.learner.notes
        # overlap of collection and learning (run.overlap_collection): the batch waiting to be trained on
        self.overlap = cfg.run.overlap_collection
        self._pending: tuple[PPOBatch, Array | None] | None = None
        self._pending_metrics: dict[str, float] = {}
        self._update_error: BaseException | None = None
        self.compat = compat_signature(
            env.obs_dim, env.num_actions, cfg.ppo.policy_layers, cfg.ppo.critic_layers, self.action_form,
            recurrent_spec(cfg),
        )  # fmt: skip

    # ------------------------------------------------------------------ parts
    def _build_model(self, obs_dim: int, num_actions: int) -> PolicyModel:
        form = self.env_cfg.env.action_form
        assert form in HEAD_FOR_FORM
        return build_policy_model(self.cfg, obs_dim, num_actions, form, self.env_cfg.env.action_bins)

    def _new_collector(self) -> ArenaCollector | RayCollector:
        """The collector of the current curriculum stage, with the current reward phase applied
        (Ray actors with ``run.collector: ray``, imported only then)."""
        self.env_cfg = stage_config(self.cfg, self.stage)
        collector: ArenaCollector | RayCollector
        if self.cfg.run.collector == "ray":
            from speedflip.collect.ray_collector import RayCollector

            collector = RayCollector(self.cfg, self.stage, self.run_dir)
        else:
            # the critic pass after a rollout runs alone unless an update overlaps collection
            value_threads = 0 if self.cfg.run.overlap_collection else self.update_threads
            collector = ArenaCollector(
                self.cfg, self.stage, self._build_model, self.device, self.run_dir, value_threads=value_threads
            )
        self.env_cfg = collector.env_cfg
        self._apply_reward_phase(collector)
        self.notes += collector.notes
        return collector

    def _apply_reward_phase(self, collector: ArenaCollector | RayCollector) -> None:
        env_cfg = collector.env_cfg.env
        if env_cfg.reward_phases:
            collector.env.set_reward_weights(
                env_cfg.reward_phases[min(self.reward_phase, len(env_cfg.reward_phases) - 1)].rewards
            )
        if env_cfg.mechanics_share > 0:  # no lane, nothing to switch (and not every backend has one)
            collector.env.set_mechanics_active(mechanics_active(env_cfg, self.reward_phase))

    # the parts as the run loop, the CLI and the tests see them
    @property
    def env(self) -> VecEnv:
        return self.collector.env

    @property
    def matchmaker(self) -> Matchmaker:
        return self.collector.matchmaker

    @property
    def model(self) -> PolicyModel:
        return self.learner.model

    @property
    def obs_rms(self) -> Any:
        return self.learner.obs_rms

    @property
    def obs(self) -> Array:
        return self.collector.obs

    @property
    def iteration(self) -> int:
        return self.learner.version

    @property
    def step_hook(self) -> Callable[[], None] | None:
        hook: Callable[[], None] | None = self.collector.step_hook
        return hook

    @step_hook.setter
    def step_hook(self, hook: Callable[[], None] | None) -> None:
        self.collector.step_hook = hook

    @property
    def stage_name(self) -> str:
        return stage_name(self.cfg, self.stage)

    @property
    def reward_phase_name(self) -> str:
        return reward_phase_name(self.env_cfg.env, self.reward_phase)

    @property
    def total_discarded_rollouts(self) -> int:
        return self.collector.total_discarded_rollouts

    @property
    def nonfinite_updates_in_row(self) -> int:
        return self.learner.guard.bad_updates_in_row

    @property
    def total_nonfinite_updates(self) -> int:
        return self.learner.guard.total_bad_updates

    @property
    def total_weight_restores(self) -> int:
        return self.learner.guard.total_restores

    @property
    def last_nonfinite_reason(self) -> str:
        return self.learner.guard.last_reason

    # ------------------------------------------------------------------ collect and learn
    def collect(self) -> tuple[PPOBatch, Array, EpisodeStats]:
        """One rollout, prepared for the update: ``(batch, raw observations, stats)``.

        In overlap mode (``run.overlap_collection``) the update of the previous rollout runs in a
        background thread meanwhile, and the weights from before that update act: the rollout is one
        policy version behind the weights that train on it (PPO's ratio is taken against the acting
        log-probabilities).
        """
        weights = self.learner.policy_weights()
        thread: threading.Thread | None = None
        if self.overlap and self._pending is not None:
            pending, self._pending = self._pending, None
            thread = threading.Thread(target=self._background_update, args=pending, name="ppo-update", daemon=True)
            thread.start()
        try:
            rollout = self.collector.collect(weights, self.global_step, self.train_clock())
        finally:
            if thread is not None:
                thread.join()
        if self._update_error is not None:
            error, self._update_error = self._update_error, None
            raise error
        self.global_step += rollout.stats.steps
        return self.learner.prepare(rollout), rollout.raw_obs, rollout.stats

    def update(self, batch: PPOBatch, raw_obs: Array | None = None) -> dict[str, float]:
        """One PPO update on ``batch`` with the schedule's learning rate and entropy bonus.

        In overlap mode the batch is kept for the next :meth:`collect`, which trains on it in the
        background; the metrics returned are those of the update that finished last (empty at first).
        """
        if self.overlap:
            self._pending = (batch, raw_obs)
            metrics, self._pending_metrics = self._pending_metrics, {}
            return metrics
        return self._update_now(batch, raw_obs)

    def _update_now(self, batch: PPOBatch, raw_obs: Array | None) -> dict[str, float]:
        step = self.global_step
        seconds = self.train_clock()
        rate = learning_rate(self.cfg, step, self.learner.learning_rate, seconds)
        kickstart = kickstart_coef(self.cfg, step, seconds)
        self.learner.set_hyperparameters(rate, ent_coef(self.cfg, step, seconds), kickstart)
        # the kickstart's weight reached 0 (release_kl_coef needs one that ends): KL toward the policy as it is now
        if self.cfg.ppo.release_kl_coef > 0 and kickstart == 0 and self.learner.release_anchor is None:
            self.learner.freeze_release_anchor()
        if self.overlap:  # collection runs at the same time: keep its thread count
            return self.learner.update(batch, raw_obs, where=f"step {step:,}")
        with torch_threads(self.update_threads):
            return self.learner.update(batch, raw_obs, where=f"step {step:,}")

    def finish_pending_update(self) -> None:
        """Train on the rollout waiting for the next collect (overlap mode) so a checkpoint includes it."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._pending_metrics = self._update_now(*pending)

    def _background_update(self, batch: PPOBatch, raw_obs: Array | None) -> None:
        try:
            self._pending_metrics = self._update_now(batch, raw_obs)
        except BaseException as err:  # handed to the main thread, raised at the end of collect()
            self._update_error = err

    # ------------------------------------------------------------------ checkpoints
    def to_checkpoint(self, extra_meta: dict[str, Any] | None = None) -> Checkpoint:
        state = self.learner.state_dict()
        env = self.env
        meta = {
            **state.meta,
            "compat": self.compat,
            "numpy_rng": self.collector.rng_state(),
            "num_agents": env.num_agents,
            "stage": self.stage,
            "reward_phase": self.reward_phase,
            "reward_phase_name": self.reward_phase_name,
            "stage_name": self.stage_name,
            "learner_elo": self.matchmaker.learner_elo,
            "lineage": self.lineage,
            "summary": {
                "device": str(self.device),
                "arenas": env.num_arenas,
                "agents": env.num_agents,
                "obs_dim": env.obs_dim,
                "actions": env.num_actions,
                "parameters": self.model.num_parameters(),
                "batch_size": self.cfg.ppo.num_steps * len(self.matchmaker.learner_cols),
                "minibatch_size": self.cfg.ppo.minibatch_size,
                "checkpoint_interval_steps": self.cfg.run.checkpoint_interval_steps,
            },
            **(extra_meta or {}),
        }
        return make_checkpoint(state.model, state.optimizer, state.tensors, self.cfg, meta)

    def save(self, checkpoints_dir: Path, extra_meta: dict[str, Any] | None = None) -> Path:
        self.finish_pending_update()
        return save_checkpoint(
            checkpoints_dir, self.global_step, self.to_checkpoint(extra_meta), self.cfg.run.keep_checkpoints
        )

    def load(self, path: Path) -> None:
        """Restore the learner, the counters, the stage and phase and the arenas' RNG from ``path``."""
        ckpt = load_checkpoint(path)
        self._restore_schedule(ckpt.meta)
        optimizer = optimizer_from_tensors(ckpt.optimizer_tensors, ckpt.optimizer_meta)
        self.learner.load_state_dict(LearnerState(ckpt.model, optimizer, ckpt.state_tensors, ckpt.meta))
        self.env.set_rng_state(ckpt.meta["numpy_rng"])
        self.global_step = int(ckpt.meta["global_step"])
        lineage = ckpt.meta.get("lineage")
        self.lineage = lineage if isinstance(lineage, list) else []

    def start_from(self, path: Path, keep_step: bool, lineage: list[dict[str, Any]]) -> None:
        """Warm start (``--from``): the policy of ``path`` (weights and observation normalizer); with
        ``keep_step`` also the optimizer, the step counter, the curriculum stage and the reward phase.
        The arenas keep this run's seed; ``lineage`` goes into every checkpoint of this run."""
        ckpt = load_checkpoint(path)
        if keep_step:
            self._restore_schedule(ckpt.meta)
        optimizer = optimizer_from_tensors(ckpt.optimizer_tensors, ckpt.optimizer_meta) if keep_step else {}
        self.learner.load_policy(LearnerState(ckpt.model, optimizer, ckpt.state_tensors, ckpt.meta), keep_step)
        self.global_step = int(ckpt.meta["global_step"]) if keep_step else 0
        self.lineage = lineage

    def _restore_schedule(self, meta: dict[str, Any]) -> None:
        """The curriculum stage (a new collector when it differs) and the reward phase saved in ``meta``."""
        stage = int(meta.get("stage", 0))
        if self.cfg.curriculum.enabled and stage != self.stage and stage < len(self.cfg.curriculum.stages):
            self.collector.close()
            self.stage = stage
            self.collector = self._new_collector()
        phases = self.env_cfg.env.reward_phases
        self.reward_phase = min(int(meta.get("reward_phase", 0)), max(len(phases) - 1, 0))
        self._apply_reward_phase(self.collector)

    # ------------------------------------------------------------------ between iterations
    def milestone(self, extra_meta: dict[str, Any] | None = None) -> Path | None:
        """A full snapshot under ``milestones/<stage>/<step>/`` (kept forever); it joins the pool."""
        if self.run_dir is None:
            return None
        self.finish_pending_update()
        folder = self.run_dir / "milestones" / self.stage_name
        path = save_checkpoint(folder, self.global_step, self.to_checkpoint(extra_meta), keep=10**9)
        self.matchmaker.add_snapshot(path)
        return path

    def evaluate_vs_rule(self) -> dict[str, float | None]:
        """Play ``selfplay.eval_games`` games against the rule bot; rate them (see :mod:`.evaluation`)."""
        rms = self.obs_rms if self.cfg.ppo.normalize_obs else None
        self.last_eval = evaluate_vs_rule(
            self.env_cfg, self.model, rms, self.env.obs_dim, self.matchmaker, self.global_step,
            self.cfg.run.seed + self.iteration, self.run_dir,
        )  # fmt: skip
        return self.last_eval

    def advance_reward_phase(self, record: dict[str, Any]) -> str | None:
        """Switch to the next reward phase when the schedule says so; returns its message."""
        change = next_reward_phase(self.env_cfg.env, self.reward_phase, self.global_step, record)
        if change is None:
            return None
        self.reward_phase = change.index
        self._apply_reward_phase(self.collector)
        return change.message

    def advance_curriculum(self) -> str | None:
        """Move to the next curriculum stage when the schedule says so (a new collector); its message."""
        mm = self.matchmaker
        change = next_stage(self.cfg, self.stage, self.global_step, mm.recent_win_rate(), mm.learner_elo)
        if change is None:
            return None
        self.collector.close()
        self.stage = change.index
        self.collector = self._new_collector()
        return change.message

    def close(self) -> None:
        self._pending = None  # a rollout not trained on is dropped like an unfinished episode
        self.collector.close()


def summarize_iteration(
    trainer: Trainer,
    stats: EpisodeStats,
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
        **{f"charts/{name}": value for name, value in stats.episode_metrics.items()},
        "perf/sps": stats.steps / max(total_seconds, 1e-9),
        "perf/collect_sps": stats.steps / max(stats.collect_seconds, 1e-9),
        "perf/learn_sps": stats.steps / max(metrics.get("update_seconds", learn_seconds), 1e-9),
        "perf/collect_seconds": stats.collect_seconds,
        "perf/learn_seconds": metrics.get("update_seconds", learn_seconds),
        "perf/policy_version": stats.policy_version,
        "perf/policy_lag": 1 if trainer.overlap else 0,
        "health/worker_restarts": trainer.env.worker_restarts,
        "health/discarded_rollouts": trainer.total_discarded_rollouts,
        "health/nonfinite_updates": trainer.total_nonfinite_updates,
        "health/weight_restores": trainer.total_weight_restores,
        "health/nonfinite_minibatches": metrics.get("nonfinite_minibatches"),
    }
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm",
                "explained_variance"):  # fmt: skip
        record[f"losses/{key}"] = metrics.get(key)
    record["charts/learning_rate"] = metrics.get("learning_rate")
    if trainer.cfg.ppo.kickstart_coef > 0:  # kickstarting: the weight used and how far the policy is from the rule bot
        record["charts/kickstart_coef"] = kickstart_coef(trainer.cfg, trainer.global_step, trainer.train_clock())
        record["losses/kickstart_cross_entropy"] = metrics.get("kickstart_cross_entropy")
        record["losses/kickstart_agreement"] = metrics.get("kickstart_agreement")
    if trainer.cfg.ppo.release_kl_coef > 0:
        record["losses/release_kl"] = metrics.get("release_kl")
    if trainer.cfg.ppo.mirror_augment != "none":  # how far the policy is from its own left-right mirror
        record["losses/mirror_kl"] = metrics.get("mirror_kl")
    if trainer.cfg.ppo.mirror_coef > 0:  # the symmetry loss: the policy's KL from its mirror on the minibatches
        record["losses/mirror_loss"] = metrics.get("mirror_loss")
    for name, mean in stats.reward_means.items():
        record[f"rewards/{name}"] = mean
    record.update(trainer.collector.metrics())  # the backend's own (Ray: actor restarts, stale rollouts, transfers)
    return record
