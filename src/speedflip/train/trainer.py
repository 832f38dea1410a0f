"""The training loop: collect a rollout -> GAE -> PPO update -> log -> checkpoint.

Self-play: every car of every arena is driven by the learning policy, one batched forward pass
for all agents per step, and all of their experience trains it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import torch
import yaml

from speedflip import __version__
from speedflip._types import Array
from speedflip.accel import compile_networks, make_gradient_step
from speedflip.algos.normalize import ReturnNormalizer, RunningMeanStd
from speedflip.algos.ppo import Batch, compute_gae, ppo_update
from speedflip.algos.ppo_recurrent import SequenceRollout, recurrent_ppo_update
from speedflip.collect import make_vec_env
from speedflip.collect.multiprocess import CollectorError
from speedflip.config import Config, ConfigError, config_to_dict
from speedflip.device import resolve_device
from speedflip.env.action_forms import action_mask, controls_from_continuous, controls_from_multi_discrete
from speedflip.env.actions import NUM_CONTROLS
from speedflip.env.episodes import episode_means
from speedflip.env.vec_env import RocketLeagueVecEnv, StepResult
from speedflip.errors import RunStoppedError
from speedflip.models.build import HEAD_FOR_FORM, PolicyModel, recurrent_spec
from speedflip.models.mlp import ActorCritic
from speedflip.models.recurrent import RecurrentActorCritic
from speedflip.selfplay.league import REFERENCE_PLAYER, append_games
from speedflip.selfplay.match import OBS_KEYS, match_env_config, play_match, summarize
from speedflip.selfplay.matchmaker import LEARNER, LivePolicy, Matchmaker
from speedflip.selfplay.policies import ScriptedPolicy
from speedflip.selfplay.rule_policy import RulePolicy
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


def default_torch_threads(cores: int) -> int:
    """Half the cores, at least one. The policy's batches are small and torch's worker threads spin
    while they wait: measured on 2 cores with other processes running, 2 torch threads made
    collection 6x and the PPO update 5x slower than 1 thread (docs/performance.md)."""
    return max(1, cores // 2)


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


class TrainingDivergedError(RunStoppedError):
    """NaN/Inf losses or gradients persisted through restores of the last good weights."""


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
    episode_metrics: dict[str, float | None] = field(default_factory=dict)  # env.episodes.episode_means
    policy_version: int = 0  # the update count of the weights that acted in this rollout


class Trainer:
    """Owns the environment, the model, the optimizer, the normalizers and the counters."""

    def __init__(self, cfg: Config, run_dir: Path | None = None) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        cores = os.cpu_count() or 1
        torch.set_num_threads(cfg.run.torch_threads or default_torch_threads(cores))
        torch.manual_seed(cfg.run.seed)
        choice = resolve_device(cfg.run.device)
        self.device = choice.device
        self.notes: list[str] = [choice.note] if choice.note else []
        self.stage = 0
        self.reward_phase = 0
        self.return_norm: ReturnNormalizer | None = None
        self._build_env()
        self.action_form = self.env_cfg.env.action_form
        self.model = self._new_model()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.ppo.learning_rate, eps=1e-5)
        self.gradient_step = make_gradient_step(self.device, cfg.run.amp)
        self.notes += self.gradient_step.notes
        if cfg.run.compile and isinstance(self.model, ActorCritic):
            example = torch.zeros(8, self.env.obs_dim, device=self.device)
            nets: dict[str, torch.nn.Module] = {"policy": self.model.policy, "critic": self.model.critic}
            self.model.compiled.update(compile_networks(nets, example, self.notes))
        elif cfg.run.compile:
            self.notes.append("torch.compile: not applied to the recurrent model (LSTM/GRU core); running eagerly")
        self.generator = torch.Generator().manual_seed(cfg.run.seed + 1)
        self.obs_rms = RunningMeanStd((self.env.obs_dim,))
        # numerical guards: the last weights an update left finite, and the bad-update counters
        self._good_weights = self._snapshot_weights()
        self.nonfinite_updates_in_row = 0
        self.nonfinite_restores_in_row = 0
        self.total_nonfinite_updates = 0
        self.total_weight_restores = 0
        self.total_discarded_rollouts = 0
        self._env_rng_state: dict[str, Any] = self.env.get_rng_state()
        self.last_nonfinite_reason = ""
        # overlap of collection and learning (run.overlap_collection)
        self.overlap = cfg.run.overlap_collection
        self._pending: tuple[Batch | SequenceRollout, Array | None] | None = None  # collected, not trained on yet
        self._pending_metrics: dict[str, float] = {}
        self._update_error: BaseException | None = None
        self.actor: PolicyModel | None = None  # the weights acting while the model trains (overlap mode)
        self.global_step = 0
        self.iteration = 0
        self.last_eval: dict[str, float | None] = {}
        self.step_hook: Callable[[], None] | None = None  # called after every env step (e.g. the live view)
        self.compat = compat_signature(
            self.env.obs_dim,
            self.env.num_actions,
            cfg.ppo.policy_layers,
            cfg.ppo.critic_layers,
            self.action_form,
            recurrent_spec(cfg),
        )

    # ------------------------------------------------------------------ environment and opponents
    def _build_env(self) -> None:
        """(Re)build the env and the matchmaker for the current curriculum stage."""
        cfg = self.cfg
        self.env_cfg = stage_config(cfg, self.stage)
        self.env = make_vec_env(self.env_cfg, seed=cfg.run.seed + 1000 * self.stage)
        phases = self.env_cfg.env.reward_phases
        if phases:
            self.env.set_reward_weights(phases[min(self.reward_phase, len(phases) - 1)].rewards)
        self._sync_mechanics_lane()
        env_cfg = self.env_cfg.env
        self.car_teams = np.array([0] * env_cfg.blue_size + [1] * env_cfg.orange_size, np.int64)
        self.state_available = isinstance(self.env, RocketLeagueVecEnv)
        self.masking = env_cfg.action_masking and env_cfg.action_form == "table"
        if self.masking and not self.state_available:
            raise ConfigError(
                "env.action_masking needs the arena state in this process: set run.collector=inprocess "
                "(or turn masking off)"
            )
        selfplay = cfg.selfplay
        if selfplay.include_rule and not self.state_available:
            selfplay = selfplay.model_copy(update={"include_rule": False})
            self.notes.append("the rule bot needs the in-process collector; it is left out of the pool")
        self.matchmaker = Matchmaker(
            selfplay, stage_opponent_share(cfg, self.stage), self.env.num_arenas, self.car_teams,
            self.env.actions.table, self.env.obs_dim, self.run_dir, cfg.run.seed + 17 * self.stage,
        )  # fmt: skip
        if self.run_dir is not None:
            self.matchmaker.load_milestones(self.run_dir / "milestones")
        if self.matchmaker.pool_arenas and not self.matchmaker.members:
            self.notes.append("the opponent pool is empty: pool arenas fall back to self-play until a milestone")
        self.matchmaker.sample(np.arange(self.env.num_arenas))
        learners = len(self.matchmaker.learner_cols)
        old = self.return_norm
        self.return_norm = ReturnNormalizer(learners, cfg.ppo.gamma)
        if old is not None:
            self.return_norm.rms = old.rms
        self.obs = self.env.reset()
        # recurrent policies: one state row per agent of every arena, zeroed where an episode starts
        self.hidden: torch.Tensor | None = None
        self.starts = np.ones(self.env.num_agents, bool)

    @property
    def stage_name(self) -> str:
        return self.cfg.curriculum.stages[self.stage].name if self.cfg.curriculum.enabled else "main"

    # ------------------------------------------------------------------ helpers
    def _tensor(self, array: Array) -> torch.Tensor:
        """``array`` on the training device; on CUDA through pinned memory (an asynchronous copy)."""
        if self.device.type != "cuda":
            return torch.as_tensor(array, device=self.device)
        return torch.from_numpy(np.ascontiguousarray(array)).pin_memory().to(self.device, non_blocking=True)

    def learning_rate(self) -> float:
        if not self.cfg.ppo.anneal_lr:
            return self.cfg.ppo.learning_rate
        frac = max(0.0, 1.0 - self.global_step / self.cfg.run.total_steps)
        return self.cfg.ppo.learning_rate * frac

    def _new_model(self) -> PolicyModel:
        """The network the config asks for: feed-forward actor-critic, or LSTM/GRU for ``ppo_recurrent``."""
        if self.cfg.algo == "ppo_recurrent":
            r = self.cfg.recurrent
            recurrent = RecurrentActorCritic(
                self.env.obs_dim,
                self.env.num_actions,
                r.cell,
                r.hidden_size,
                r.num_layers,
                r.encoder_layers,
                r.head_layers,
            )
            return recurrent.to(self.device)
        model = ActorCritic(
            self.env.obs_dim, self.env.num_actions, self.cfg.ppo.policy_layers, self.cfg.ppo.critic_layers,
            head=HEAD_FOR_FORM[self.action_form], bins=self.env_cfg.env.action_bins,
        )  # fmt: skip
        return model.to(self.device)

    # ------------------------------------------------------------------ collect
    def collect(self) -> tuple[Batch | SequenceRollout, Array, RolloutStats]:
        """Run ``num_steps`` steps in every arena; returns the batch, the raw observations and stats.

        A rollout during which a collection worker was restarted is discarded (the restarted arenas
        were cut mid-episode, their steps would mix two worlds) and collected again; the count is in
        ``total_discarded_rollouts``. In overlap mode (``run.overlap_collection``) the update of the
        previous rollout runs in a background thread meanwhile, and a copy of the weights from before
        that update acts: the rollout is one policy version behind the weights that train on it.
        """
        thread: threading.Thread | None = None
        model, rms = self.model, self.obs_rms
        if self.overlap and self._pending is not None:
            model, rms = self._acting_copy()
            pending, self._pending = self._pending, None
            thread = threading.Thread(target=self._background_update, args=pending, name="ppo-update", daemon=True)
            thread.start()
        version = self.iteration
        discarded = 0
        try:
            self._env_rng_state = self.env.get_rng_state()  # for a checkpoint after the collector failed
            while True:
                restarts = self.env.worker_restarts
                batch, raw_obs, stats = self._collect_rollout(model, rms)
                if self.env.worker_restarts == restarts:
                    break
                discarded += 1
                if discarded > self.cfg.run.max_worker_restarts + 1:
                    raise RunStoppedError(
                        f"{discarded} rollouts in a row were cut by collection-worker restarts; check "
                        "`speedflip doctor` and free memory, or use run.collector=inprocess"
                    )
        except CollectorError as err:
            if isinstance(err, RunStoppedError):
                raise
            raise RunStoppedError(f"rollout collection failed: {err}") from err
        finally:
            if thread is not None:
                thread.join()
        if self._update_error is not None:
            error, self._update_error = self._update_error, None
            raise error
        self.global_step += stats.steps
        stats.policy_version = version
        self.total_discarded_rollouts += discarded
        return batch, raw_obs, stats

    def _acting_copy(self) -> tuple[PolicyModel, RunningMeanStd]:
        """A copy of the current weights and observation statistics that acts while the model trains."""
        if self.actor is None:
            self.actor = self._new_model()
        self.actor.load_state_dict(self.model.state_dict())
        rms = RunningMeanStd((self.env.obs_dim,))
        rms.load_state_dict(self.obs_rms.state_dict())
        return self.actor, rms

    @torch.no_grad()
    def _collect_rollout(
        self, model: PolicyModel, rms: RunningMeanStd
    ) -> tuple[Batch | SequenceRollout, Array, RolloutStats]:
        """One rollout acted by ``model`` with observations normalized by ``rms``.

        A recurrent model carries one state row per agent across steps (and rollouts), zeroed where
        an episode starts; the state at every ``sequence_length``-th step is stored for BPTT.
        """

        def normalize(obs: Array) -> Array:
            return rms.normalize(obs) if self.cfg.ppo.normalize_obs else obs

        cols = self.matchmaker.learner_cols
        T, N, D = self.cfg.ppo.num_steps, len(cols), self.env.obs_dim
        assert self.return_norm is not None
        raw_obs = np.zeros((T, N, D), np.float32)
        obs_buf = np.zeros((T, N, D), np.float32)
        form = self.env_cfg.env.action_form
        if form == "table":
            actions = np.zeros((T, N), np.int64)
        else:
            actions = np.zeros((T, N, NUM_CONTROLS), np.float32 if form == "continuous" else np.int64)
        masks = np.ones((T, N, self.env.num_actions), bool) if self.masking else None
        log_probs = np.zeros((T, N), np.float32)
        values = np.zeros((T, N), np.float32)
        rewards = np.zeros((T, N), np.float32)
        terminated = np.zeros((T, N), bool)
        truncated = np.zeros((T, N), bool)
        truncation_values = np.zeros((T, N), np.float32)
        recurrent = isinstance(model, RecurrentActorCritic)
        L = self.cfg.recurrent.sequence_length if recurrent else 1
        starts = np.zeros((T, N), bool)
        if isinstance(model, RecurrentActorCritic) and self.hidden is None:
            self.hidden = model.initial_state(self.env.num_agents, self.device)
        states = torch.zeros(T // L, *(self.hidden[:, cols].shape if self.hidden is not None else (0,)))
        episode_returns: list[float] = []
        episode_lengths: list[float] = []
        finished: list[dict[str, float]] = []
        touches0, seconds0, goals0 = (
            self.env.total_touches,
            self.env.total_agent_seconds,
            self.env.total_goals,
        )
        reward_sums: dict[str, float] = {}
        raw_reward_sum = 0.0
        start = time.perf_counter()
        for t in range(T):
            normalized = normalize(self.obs)
            raw_obs[t] = self.obs[cols]
            obs_buf[t] = normalized[cols]
            mask = None
            if masks is not None and isinstance(self.env, RocketLeagueVecEnv):
                mask = action_mask(self.env.state, self.car_teams, self.env.actions.table)
                masks[t] = mask[cols]
            if isinstance(model, RecurrentActorCritic):
                assert self.hidden is not None
                if t % L == 0:
                    states[t // L] = self.hidden[:, cols].cpu()
                starts[t] = self.starts[cols]
                action, log_prob, value, self.hidden = model.act(
                    self._tensor(normalized), self.hidden, self._tensor(self.starts)
                )
            else:
                action, log_prob, value = model.act(
                    self._tensor(normalized), mask=None if mask is None else self._tensor(mask)
                )
            chosen = action.cpu().numpy()
            if self.matchmaker.pool_arenas:
                state = self.env.state if isinstance(self.env, RocketLeagueVecEnv) else None
                chosen = self.matchmaker.fill_opponent_actions(chosen, self.obs, state)
            actions[t] = chosen[cols]
            log_probs[t] = log_prob.cpu().numpy()[cols]
            values[t] = value.cpu().numpy()[cols]
            result = self._step_env(chosen)
            if self.step_hook is not None:
                self.step_hook()
            self.matchmaker.on_step(result.terminated, result.truncated, result.goal_team, self.global_step)
            step_rewards = result.rewards[cols]
            raw_reward_sum += float(step_rewards.mean())
            for name, mean in self.env.reward_means().items():
                reward_sums[name] = reward_sums.get(name, 0.0) + mean
            terminated[t], truncated[t] = result.terminated[cols], result.truncated[cols]
            self.starts = result.terminated | result.truncated
            done = terminated[t] | truncated[t]
            if self.cfg.ppo.normalize_rewards:
                rewards[t] = self.return_norm(step_rewards, done)
            else:
                rewards[t] = step_rewards
            if truncated[t].any():
                rows = np.flatnonzero(truncated[t])
                final = self._tensor(normalize(result.final_obs[cols[rows]]))
                if isinstance(model, RecurrentActorCritic):
                    assert self.hidden is not None  # V(final obs) continues the episode's memory
                    hidden = self.hidden[:, self._tensor(cols[rows])]
                    no_start = torch.zeros(rows.size, dtype=torch.bool, device=self.device)
                    truncation_values[t, rows] = model.value(final, hidden, no_start).cpu().numpy()
                else:
                    truncation_values[t, rows] = model.value(final).cpu().numpy()
            for episode in result.episodes:
                episode_returns.append(episode["return"])
                episode_lengths.append(episode["length_seconds"])
                finished.append(episode)
            self.obs = result.obs
        last_obs = self._tensor(normalize(self.obs[cols]))
        if isinstance(model, RecurrentActorCritic):
            assert self.hidden is not None
            hidden = self.hidden[:, self._tensor(cols)]
            last_values = model.value(last_obs, hidden, self._tensor(self.starts[cols])).cpu().numpy()
        else:
            last_values = model.value(last_obs).cpu().numpy()
        advantages, returns = compute_gae(
            rewards, values, terminated, truncated, truncation_values, last_values,
            self.cfg.ppo.gamma, self.cfg.ppo.gae_lambda,
        )  # fmt: skip
        collect_seconds = time.perf_counter() - start
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
            episode_metrics=episode_means(finished),
        )
        if recurrent:
            rollout = SequenceRollout(
                obs=self._tensor(obs_buf), actions=self._tensor(actions), log_probs=self._tensor(log_probs),
                values=self._tensor(values), advantages=self._tensor(advantages), returns=self._tensor(returns),
                starts=self._tensor(starts), states=states.to(self.device),
            )  # fmt: skip
            return rollout, raw_obs, stats
        batch = Batch(
            obs=self._tensor(obs_buf.reshape(T * N, D)),
            actions=self._tensor(actions.reshape(T * N, *actions.shape[2:])),
            masks=None if masks is None else self._tensor(masks.reshape(T * N, -1)),
            log_probs=self._tensor(log_probs.reshape(-1)),
            values=self._tensor(values.reshape(-1)),
            advantages=self._tensor(advantages.reshape(-1)),
            returns=self._tensor(returns.reshape(-1)),
        )
        return batch, raw_obs, stats

    def _step_env(self, chosen: Array) -> StepResult:
        """Step with table indices, or with controls made from continuous / multi-discrete actions."""
        form = self.env_cfg.env.action_form
        if form == "table":
            return self.env.step(chosen)
        if form == "continuous":
            controls = controls_from_continuous(chosen)
        else:
            controls = controls_from_multi_discrete(chosen, self.env_cfg.env.action_bins)
        if not isinstance(self.env, RocketLeagueVecEnv):
            raise ConfigError(f"env.action_form={form} needs the in-process collector: set run.collector=inprocess")
        return self.env.step(np.zeros(self.env.num_agents, np.int64), controls)

    # ------------------------------------------------------------------ update
    def update(self, batch: Batch | SequenceRollout, raw_obs: Array | None = None) -> dict[str, float]:
        """One PPO update on ``batch``; then fold the rollout's raw observations into the normalizer.

        In overlap mode the batch is kept for the next :meth:`collect`, which trains on it in the
        background; the metrics returned are those of the update that finished last (empty at first).
        """
        if self.overlap:
            self._pending = (batch, raw_obs)
            metrics, self._pending_metrics = self._pending_metrics, {}
            return metrics
        return self._update_now(batch, raw_obs)

    def finish_pending_update(self) -> None:
        """Train on the rollout waiting for the next collect (overlap mode) so a checkpoint includes it."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._pending_metrics = self._update_now(*pending)

    def _background_update(self, batch: Batch | SequenceRollout, raw_obs: Array | None) -> None:
        try:
            self._pending_metrics = self._update_now(batch, raw_obs)
        except BaseException as err:  # handed to the main thread, raised at the end of collect()
            self._update_error = err

    def _update_now(self, batch: Batch | SequenceRollout, raw_obs: Array | None) -> dict[str, float]:
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate()
        start = time.perf_counter()
        bad_inputs = nonfinite_fields(batch)
        if bad_inputs:
            metrics: dict[str, float] = {"nonfinite_minibatches": float("nan")}
            reason = f"the rollout itself holds NaN/Inf in {', '.join(bad_inputs)}"
        else:
            metrics = self._ppo_update(batch)
            reason = None
            if metrics["nonfinite_minibatches"] > 0:
                reason = f"NaN/Inf loss or gradients in {metrics['nonfinite_minibatches']:.0f} minibatches"
        poisoned = not weights_finite(self.model)
        if poisoned and not bad_inputs:
            reason = "the weights became NaN/Inf"
        self._guard(reason, poisoned)
        if reason is None and raw_obs is not None and self.cfg.ppo.normalize_obs:
            self.obs_rms.update(raw_obs.reshape(-1, raw_obs.shape[-1]))
        self.iteration += 1
        metrics["learning_rate"] = self.learning_rate()
        metrics["update_seconds"] = time.perf_counter() - start
        return metrics

    def _ppo_update(self, batch: Batch | SequenceRollout) -> dict[str, float]:
        cfg, step = self.cfg, self.gradient_step
        if isinstance(batch, SequenceRollout):
            assert isinstance(self.model, RecurrentActorCritic)
            length = cfg.recurrent.sequence_length
            return recurrent_ppo_update(self.model, self.optimizer, batch, cfg.ppo, length, self.generator, step)
        assert isinstance(self.model, ActorCritic)
        return ppo_update(self.model, self.optimizer, batch, cfg.ppo, self.generator, step)

    def _snapshot_weights(self) -> dict[str, Any]:
        return {
            "model": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
            "optimizer": copy.deepcopy(self.optimizer.state_dict()),
        }

    def _guard(self, reason: str | None, poisoned: bool) -> None:
        """Count bad updates; restore the last good weights after ``max_nonfinite_updates`` in a row
        (at once when the weights themselves are ``poisoned``); stop the run when
        ``max_nonfinite_restores`` restores in a row did not help."""
        if reason is None:
            self.nonfinite_updates_in_row = 0
            self.nonfinite_restores_in_row = 0
            self._good_weights = self._snapshot_weights()
            return
        self.total_nonfinite_updates += 1
        self.nonfinite_updates_in_row += 1
        self.last_nonfinite_reason = reason
        if self.nonfinite_updates_in_row < self.cfg.run.max_nonfinite_updates and not poisoned:
            return  # this update's bad minibatches were skipped; the weights are still the good ones
        self.model.load_state_dict(self._good_weights["model"])
        self.optimizer.load_state_dict(copy.deepcopy(self._good_weights["optimizer"]))
        self.nonfinite_updates_in_row = 0
        self.nonfinite_restores_in_row += 1
        self.total_weight_restores += 1
        if self.nonfinite_restores_in_row >= self.cfg.run.max_nonfinite_restores:
            raise TrainingDivergedError(
                f"training diverged at step {self.global_step:,}: {reason}, and {self.nonfinite_restores_in_row} "
                "restores of the last good weights in a row did not help. The model now holds the last good "
                "weights. Likely causes: a learning rate too high (ppo.learning_rate="
                f"{self.cfg.ppo.learning_rate:g}), reward weights giving huge or NaN rewards (see rewards/* in "
                "metrics.jsonl), NaN observations from a custom component. Fix the cause, then resume."
            )

    # ------------------------------------------------------------------ checkpoints
    def to_checkpoint(self, extra_meta: dict[str, Any] | None = None) -> Checkpoint:
        assert self.return_norm is not None
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
            "numpy_rng": self._current_env_rng(),
            "num_agents": self.env.num_agents,
            "stage": self.stage,
            "reward_phase": self.reward_phase,
            "reward_phase_name": self.reward_phase_name,
            "stage_name": self.stage_name,
            "learner_elo": self.matchmaker.learner_elo,
            "summary": {
                "device": str(self.device),
                "arenas": self.env.num_arenas,
                "agents": self.env.num_agents,
                "obs_dim": self.env.obs_dim,
                "actions": self.env.num_actions,
                "parameters": self.model.num_parameters(),
                "batch_size": self.cfg.ppo.num_steps * len(self.matchmaker.learner_cols),
                "minibatch_size": self.cfg.ppo.minibatch_size,
                "checkpoint_interval_steps": self.cfg.run.checkpoint_interval_steps,
            },
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

    def _current_env_rng(self) -> dict[str, Any]:
        try:
            return self.env.get_rng_state()
        except CollectorError:  # the workers are gone: the state from the start of the last rollout
            return self._env_rng_state

    def save(self, checkpoints_dir: Path, extra_meta: dict[str, Any] | None = None) -> Path:
        self.finish_pending_update()
        return save_checkpoint(
            checkpoints_dir, self.global_step, self.to_checkpoint(extra_meta), self.cfg.run.keep_checkpoints
        )

    def load(self, path: Path) -> None:
        ckpt = load_checkpoint(path)
        stage = int(ckpt.meta.get("stage", 0))
        if self.cfg.curriculum.enabled and stage != self.stage and stage < len(self.cfg.curriculum.stages):
            self.env.close()
            self.stage = stage
            self._build_env()
        assert self.return_norm is not None
        phases = self.env_cfg.env.reward_phases
        self.reward_phase = min(int(ckpt.meta.get("reward_phase", 0)), max(len(phases) - 1, 0))
        if phases:
            self.env.set_reward_weights(phases[self.reward_phase].rewards)
        self._sync_mechanics_lane()
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
        self._good_weights = self._snapshot_weights()

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
        """Play ``eval_games`` games against the rule bot in separate arenas; rate them."""
        sp = self.cfg.selfplay
        env_cfg = self.env_cfg.env
        if env_cfg.action_form != "table":
            return {}  # the match players pick table rows; other action forms are rated with their own bots
        team = max(1, env_cfg.blue_size)
        pad = max(env_cfg.obs_team_size, env_cfg.blue_size, env_cfg.orange_size)
        options = {**env_cfg.model_dump(include=set(OBS_KEYS)), "obs_team_size": pad}
        match_cfg = match_env_config(sp.eval_games, team, sp.eval_game_seconds, obs_options=options)
        env = RocketLeagueVecEnv(match_cfg, seed=self.cfg.run.seed + self.iteration)
        try:
            if env.obs_dim != self.env.obs_dim:
                return {}
            live = LivePolicy(self.model, self.obs_rms if self.cfg.ppo.normalize_obs else None, self.iteration)
            rule = ScriptedPolicy(RulePolicy(env.actions.table))
            results = play_match(env, live, rule, sp.eval_game_seconds)
        finally:
            env.close()
        summary = summarize(results)
        league = self.matchmaker.league
        rows = []
        self.matchmaker.flush()  # pool games played before these go first in games.csv
        for r in results:
            rating_a, rating_b = league.record(LEARNER, REFERENCE_PLAYER, r.score_a)
            rows.append({**r.as_dict(), "step": self.global_step, "player_a": LEARNER, "player_b": REFERENCE_PLAYER,
                         "team_size": team, "rating_a": rating_a, "rating_b": rating_b})  # fmt: skip
        if self.run_dir is not None:
            league.save()
            append_games(self.run_dir / "games.csv", rows)
        self.last_eval = {
            "selfplay/winrate_vs_rule": summary.wins / summary.games,
            "selfplay/score_rate_vs_rule": summary.score_rate,
            "selfplay/goals_for_vs_rule": summary.goals_a / summary.games,
            "selfplay/goals_against_vs_rule": summary.goals_b / summary.games,
        }
        return self.last_eval

    def _sync_mechanics_lane(self) -> None:
        """Turn the env's mechanics lane on once the reward phase reaches ``env.mechanics_from_phase``."""
        env_cfg = self.env_cfg.env
        if env_cfg.mechanics_share > 0:  # no lane, nothing to switch (and not every backend has one)
            self.env.set_mechanics_active(self.reward_phase >= env_cfg.mechanics_from_phase)

    @property
    def reward_phase_name(self) -> str:
        phases = self.env_cfg.env.reward_phases
        return phases[self.reward_phase].name if phases else "rewards"

    def advance_reward_phase(self, record: dict[str, Any]) -> str | None:
        """Switch to the next reward phase when the current one's step or metric threshold is reached."""
        phases = self.env_cfg.env.reward_phases
        if self.reward_phase >= len(phases) - 1:
            return None
        phase = phases[self.reward_phase]
        reason = None
        if phase.until_steps is not None and self.global_step >= phase.until_steps:
            reason = f"step {self.global_step:,} >= {phase.until_steps:,}"
        value = record.get(phase.until_metric) if phase.until_metric else None
        threshold = phase.until_value
        if reason is None and isinstance(value, (int, float)) and threshold is not None and value >= threshold:
            reason = f"{phase.until_metric} {value:.3g} >= {threshold:g}"
        if reason is None:
            return None
        self.reward_phase += 1
        self.env.set_reward_weights(phases[self.reward_phase].rewards)
        self._sync_mechanics_lane()
        return f"reward phase: '{phase.name}' -> '{phases[self.reward_phase].name}' ({reason})"

    def advance_curriculum(self) -> str | None:
        """Move to the next stage when the current one's condition holds; returns a message if it did."""
        if not self.cfg.curriculum.enabled or self.stage >= len(self.cfg.curriculum.stages) - 1:
            return None
        stage = self.cfg.curriculum.stages[self.stage]
        win_rate = self.matchmaker.recent_win_rate()
        reasons = []
        if stage.until_steps is not None and self.global_step >= stage.until_steps:
            reasons.append(f"step {self.global_step:,} >= {stage.until_steps:,}")
        if stage.until_win_rate is not None and win_rate is not None and win_rate >= stage.until_win_rate:
            reasons.append(f"win rate vs pool {win_rate:.2f} >= {stage.until_win_rate}")
        if stage.until_elo is not None and self.matchmaker.learner_elo >= stage.until_elo:
            reasons.append(f"Elo {self.matchmaker.learner_elo:.0f} >= {stage.until_elo:g}")
        if not reasons:
            return None
        self.matchmaker.flush()
        self.env.close()
        self.stage += 1
        self._build_env()
        return f"curriculum: stage '{stage.name}' -> '{self.stage_name}' ({'; '.join(reasons)})"

    def close(self) -> None:
        self._pending = None  # a rollout not trained on is dropped like an unfinished episode
        self.matchmaker.flush()
        self.env.close()


def nonfinite_fields(batch: Batch | SequenceRollout) -> list[str]:
    """Names of the batch's float tensors that hold NaN or Inf."""
    fields = {"obs": batch.obs, "log_probs": batch.log_probs, "values": batch.values,
              "advantages": batch.advantages, "returns": batch.returns}  # fmt: skip
    return [name for name, tensor in fields.items() if not bool(torch.isfinite(tensor).all())]


def weights_finite(model: torch.nn.Module) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


def stage_config(cfg: Config, stage: int) -> Config:
    """The config with the env's team sizes of curriculum stage ``stage`` (obs padded to the largest)."""
    if not cfg.curriculum.enabled:
        return cfg
    stages = cfg.curriculum.stages
    current = stages[stage]
    pad = max([cfg.env.obs_team_size] + [max(s.blue_size, s.orange_size) for s in stages])
    env = cfg.env.model_copy(
        update={"blue_size": current.blue_size, "orange_size": current.orange_size, "obs_team_size": pad}
    )
    return cfg.model_copy(update={"env": env})


def stage_opponent_share(cfg: Config, stage: int) -> float:
    if cfg.curriculum.enabled:
        return cfg.curriculum.stages[stage].opponent_share
    return cfg.selfplay.opponent_share


class StopFlag:
    """SIGINT/SIGTERM/SIGHUP set a flag so the loop saves and exits; a second signal exits at once."""

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
        signals = [signal.SIGINT, signal.SIGTERM]
        if hasattr(signal, "SIGHUP"):  # a closed terminal; not on Windows
            signals.append(signal.SIGHUP)
        for sig in signals:
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
    for name, mean in stats.reward_means.items():
        record[f"rewards/{name}"] = mean
    return record


ProgressFn = Callable[[dict[str, Any]], None]
