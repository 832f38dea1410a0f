"""The Rocket League collector: arenas (in-process threads or worker processes), batched inference, pool
opponents and truncation bootstraps, behind ``collect(weights) -> Rollout``.

Every car of every arena is an agent; one batched forward pass per step acts for all learner rows.
A feed-forward critic is not run per step: the values of the whole rollout come from one chunked pass
after it (:meth:`ArenaCollector._values`; the same weights and inputs, larger and fewer matrix products).
In pool arenas the opponent's cars are driven by a frozen snapshot or the rule bot (the matchmaker),
and only the learner's rows go into the rollout. A recurrent policy keeps one state row per agent,
zeroed where an episode starts, and the rollout stores it at every sequence start.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from speedflip._types import Array
from speedflip.algos.normalize import RunningMeanStd
from speedflip.algos.ppo_learner import load_weights
from speedflip.collect import make_vec_env, missing_capabilities, required_capabilities, unsupported_message
from speedflip.collect.base import VecEnv
from speedflip.collect.multiprocess import CollectorError, MultiProcessVecEnv
from speedflip.config import Config, ConfigError
from speedflip.device import torch_threads
from speedflip.env.action_forms import action_mask, controls_from_continuous, controls_from_multi_discrete
from speedflip.env.actions import NUM_CONTROLS
from speedflip.env.episodes import episode_means
from speedflip.env.layout import TICK_RATE
from speedflip.env.vec_env import RocketLeagueVecEnv, StepResult
from speedflip.errors import RunStoppedError
from speedflip.models.build import PolicyModel
from speedflip.models.mlp import ActorCritic
from speedflip.models.recurrent import RecurrentActorCritic
from speedflip.rollout import EpisodeStats, PolicyWeights, Rollout
from speedflip.schedule import kickstart_coef, stage_config, stage_opponent_share
from speedflip.selfplay.matchmaker import Matchmaker
from speedflip.selfplay.rule_policy import RulePolicy

VALUE_CHUNK_ROWS = 4096  # rows per forward pass of the critic after a rollout (docs/performance.md)


@dataclass
class _Buffers:
    """The arrays one rollout fills, ``[T, N, ...]`` for ``N`` learner rows."""

    raw_obs: Array
    obs: Array
    actions: Array
    masks: Array | None
    log_probs: Array
    values: Array
    rewards: Array
    terminated: Array
    truncated: Array
    truncation_values: Array
    starts: Array
    teacher_actions: Array | None

    @classmethod
    def empty(
        cls, T: int, N: int, obs_dim: int, num_actions: int, form: str, masking: bool, teaching: bool
    ) -> _Buffers:
        if form == "table":
            actions = np.zeros((T, N), np.int64)
        else:
            actions = np.zeros((T, N, NUM_CONTROLS), np.float32 if form == "continuous" else np.int64)

        def zeros(dtype: type) -> Array:
            return np.zeros((T, N), dtype)

        return cls(
            raw_obs=np.zeros((T, N, obs_dim), np.float32),
            obs=np.zeros((T, N, obs_dim), np.float32),
            actions=actions,
            masks=np.ones((T, N, num_actions), bool) if masking else None,
            log_probs=zeros(np.float32),
            values=zeros(np.float32),
            rewards=zeros(np.float32),
            terminated=zeros(bool),
            truncated=zeros(bool),
            truncation_values=zeros(np.float32),
            starts=zeros(bool),
            teacher_actions=zeros(np.int64) if teaching else None,
        )


class ArenaCollector:
    """Collects rollouts from the arenas of one curriculum stage with an acting copy of the policy.

    ``model_factory(obs_dim, num_actions)`` builds the collector's own network (the learner's weights
    are loaded into it at every :meth:`collect`), so the learner may train meanwhile (overlap) or live
    elsewhere. It is built without drawing from torch's global generator. ``value_threads``: torch
    threads for the critic pass after a rollout, when nothing else runs (0 = collection's own count).
    """

    def __init__(
        self,
        cfg: Config,
        stage: int,
        model_factory: Callable[[int, int], PolicyModel],
        device: torch.device,
        run_dir: Path | None,
        value_threads: int = 0,
    ) -> None:
        self.cfg = cfg
        self.value_threads = value_threads
        self.stage = stage
        self.env_cfg = stage_config(cfg, stage)
        self.device = device
        self.notes: list[str] = []
        self.env: VecEnv = make_vec_env(self.env_cfg, seed=cfg.run.seed + 1000 * stage)
        with torch.random.fork_rng(devices=[]):
            self.model = model_factory(self.env.obs_dim, self.env.num_actions).to(device)
        self.obs_rms = RunningMeanStd((self.env.obs_dim,))
        env_cfg = self.env_cfg.env
        self.car_teams = np.array([0] * env_cfg.blue_size + [1] * env_cfg.orange_size, np.int64)
        # in process the arenas' state is live; worker processes publish it to shared memory after every step
        self.arena_env: RocketLeagueVecEnv | MultiProcessVecEnv | None = (
            self.env if isinstance(self.env, (RocketLeagueVecEnv, MultiProcessVecEnv)) else None
        )
        self.masking = env_cfg.action_masking and env_cfg.action_form == "table"
        if isinstance(self.env, MultiProcessVecEnv):
            # make_vec_env builds worker processes only for configs they can drive (choose_collector checks
            # the capabilities first); this guards against a backend built some other way
            missing = missing_capabilities("multiprocess", required_capabilities(self.env_cfg))
            if missing:
                self.env.close()
                raise ConfigError(unsupported_message("multiprocess", missing))
        self.teacher: RulePolicy | None = None  # kickstarting (ppo.kickstart_coef): the rule bot labels every state
        if cfg.ppo.kickstart_coef > 0:
            if self.arena_env is None:
                self.env.close()
                raise ConfigError(
                    "ppo.kickstart_coef > 0 needs the arena state (the rule bot reads it), which the RLGym adapter "
                    "does not expose: leave env.rlgym unset, or set ppo.kickstart_coef=0"
                )
            try:
                self.teacher = RulePolicy(self.env.actions.table)
            except ValueError as err:
                self.env.close()
                raise ConfigError(f"ppo.kickstart_coef > 0: {err}, or set ppo.kickstart_coef=0") from None
        selfplay = cfg.selfplay
        if selfplay.include_rule and self.arena_env is None:
            # only the RLGym adapter gets here (it refuses masks and non-table forms itself)
            selfplay = selfplay.model_copy(update={"include_rule": False})
            self.notes.append(
                "the rule bot reads the RocketSim arena state, which the RLGym adapter (env.rlgym) does not "
                "expose; it is left out of the pool"
            )
        self.matchmaker = Matchmaker(
            selfplay, stage_opponent_share(cfg, stage), self.env.num_arenas, self.car_teams,
            self.env.actions.table, self.env.obs_dim, run_dir, cfg.run.seed + 17 * stage,
            step_seconds=self.env_cfg.env.tick_skip / TICK_RATE,
        )  # fmt: skip
        if run_dir is not None:
            self.matchmaker.load_milestones(run_dir / "milestones")
        if self.matchmaker.pool_arenas and not self.matchmaker.members:
            self.notes.append("the opponent pool is empty: pool arenas fall back to self-play until a milestone")
        self.matchmaker.sample(np.arange(self.env.num_arenas))
        self.obs = self.env.reset()
        self.hidden: torch.Tensor | None = None  # recurrent: one state row per agent of every arena
        self.starts = np.ones(self.env.num_agents, bool)
        self.rng_state_at_start: dict[str, Any] = self.env.get_rng_state()
        self.total_discarded_rollouts = 0
        self.step_hook: Any = None  # called after every env step (e.g. the live view)

    @property
    def learner_rows(self) -> Array:
        return self.matchmaker.learner_cols

    def rng_state(self) -> dict[str, Any]:
        """The arenas' RNG state; the one from the start of the last rollout when the workers are gone."""
        try:
            return self.env.get_rng_state()
        except CollectorError:
            return self.rng_state_at_start

    def metrics(self) -> dict[str, float | None]:
        """The backend's own metrics for the iteration record (none in process; see the Ray collector)."""
        return {}

    def collect(self, weights: PolicyWeights, global_step: int = 0, train_seconds: float = 0.0) -> Rollout:
        """``num_steps`` steps in every arena, acted by ``weights``; ``global_step`` (agent steps so far)
        dates the rated pool games in ``games.csv``; with ``train_seconds`` (the run's training time) it
        tells whether the kickstart still runs (:func:`~speedflip.schedule.kickstart_coef`), and so whether
        the rule bot labels the learner's states.

        A rollout during which a collection worker was restarted is discarded (the restarted arenas
        were cut mid-episode, their steps would mix two worlds) and collected again; the count is in
        ``total_discarded_rollouts``. Collector faults become :class:`RunStoppedError`.
        """
        load_weights(self.model, self.obs_rms, weights)
        discarded = 0
        try:
            self.rng_state_at_start = self.env.get_rng_state()
            while True:
                restarts = self.env.worker_restarts
                rollout = self._rollout(global_step, train_seconds)
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
            self.total_discarded_rollouts += discarded
        rollout.stats.policy_version = weights.version
        return rollout

    def _normalize(self, obs: Array) -> Array:
        return self.obs_rms.normalize(obs) if self.cfg.ppo.normalize_obs else obs

    def _tensor(self, array: Array) -> torch.Tensor:
        return torch.as_tensor(array, device=self.device)

    @torch.no_grad()
    def _rollout(self, global_step: int, train_seconds: float) -> Rollout:
        cols, env, model = self.learner_rows, self.env, self.model
        T = self.cfg.ppo.num_steps
        teaching = self.teacher is not None and kickstart_coef(self.cfg, global_step, train_seconds) > 0
        buf = _Buffers.empty(
            T, len(cols), env.obs_dim, env.num_actions, self.env_cfg.env.action_form, self.masking, teaching
        )
        recurrent = isinstance(model, RecurrentActorCritic)
        L = self.cfg.recurrent.sequence_length if recurrent else 1
        if isinstance(model, RecurrentActorCritic) and self.hidden is None:
            self.hidden = model.initial_state(env.num_agents, self.device)
        states = torch.zeros(T // L, *(self.hidden[:, cols].shape if self.hidden is not None else (0,)))
        episodes: list[dict[str, float]] = []
        reward_sums: dict[str, float] = {}
        counters0 = (env.total_touches, env.total_agent_seconds, env.total_goals)
        raw_reward_sum = 0.0
        start = time.perf_counter()
        for t in range(T):
            if self.hidden is not None and t % L == 0:
                states[t // L] = self.hidden[:, cols].cpu()
            chosen = self._act(t, buf)
            result = self._step_env(chosen)
            if self.step_hook is not None:
                self.step_hook()
            self.matchmaker.on_step(result.terminated, result.truncated, result.goal_team, global_step)
            raw_reward_sum += float(result.rewards[cols].mean())
            for name, mean in env.reward_means().items():
                reward_sums[name] = reward_sums.get(name, 0.0) + mean
            self._record_step(t, buf, result)
            episodes += result.episodes
            self.obs = result.obs
        last_obs = self._normalize(self.obs[cols])
        if isinstance(model, RecurrentActorCritic):
            assert self.hidden is not None
            hidden = self.hidden[:, self._tensor(cols)]
            last_values = model.value(self._tensor(last_obs), hidden, self._tensor(self.starts[cols])).cpu().numpy()
        else:
            buf.values, last_values = self._values(model, buf.obs), self._values(model, last_obs)
        stats = self._stats(time.perf_counter() - start, T, episodes, reward_sums, raw_reward_sum, counters0)
        return Rollout(
            obs=buf.obs, raw_obs=buf.raw_obs, actions=buf.actions, log_probs=buf.log_probs, values=buf.values,
            rewards=buf.rewards, terminated=buf.terminated, truncated=buf.truncated,
            truncation_values=buf.truncation_values, last_values=last_values, stats=stats, masks=buf.masks,
            starts=buf.starts if recurrent else None, states=states if recurrent else None,
            teacher_actions=buf.teacher_actions,
        )  # fmt: skip

    def _act(self, t: int, buf: _Buffers) -> Array:
        """The actions of every agent at step ``t`` (learner rows sampled, pool opponents filled in)."""
        cols, model = self.learner_rows, self.model
        normalized = self._normalize(self.obs)
        buf.raw_obs[t] = self.obs[cols]
        buf.obs[t] = normalized[cols]
        rule_actions: Array | None = None  # the rule bot's rows for every car, asked once per step
        if buf.teacher_actions is not None and self.teacher is not None and self.arena_env is not None:
            rule_actions = self.teacher.act(self.arena_env.state, self.car_teams)
            buf.teacher_actions[t] = rule_actions[cols]
        mask = None
        if buf.masks is not None and self.arena_env is not None:
            mask = action_mask(self.arena_env.state, self.car_teams, self.env.actions.table)
            buf.masks[t] = mask[cols]
        value: torch.Tensor | None = None  # feed-forward: the values come after the rollout (_values)
        if isinstance(model, RecurrentActorCritic):
            assert self.hidden is not None
            buf.starts[t] = self.starts[cols]
            action, log_prob, value, self.hidden = model.act(
                self._tensor(normalized), self.hidden, self._tensor(self.starts)
            )
        else:
            action, log_prob = model.sample(self._tensor(normalized), mask=None if mask is None else self._tensor(mask))
        chosen: Array = action.cpu().numpy()
        if self.matchmaker.pool_arenas:
            state = self.arena_env.state if self.arena_env is not None else None
            chosen = self.matchmaker.fill_opponent_actions(chosen, self.obs, state, rule_actions)
        buf.actions[t] = chosen[cols]
        buf.log_probs[t] = log_prob.cpu().numpy()[cols]
        if value is not None:
            buf.values[t] = value.cpu().numpy()[cols]
        return chosen

    def _values(self, model: ActorCritic, obs: Array) -> Array:
        """V(obs) of normalized observations ``[..., obs_dim]``, in chunks of ``VALUE_CHUNK_ROWS`` rows.

        One pass over a whole rollout instead of one small forward per step: the same weights and
        inputs (the observation statistics do not change during a rollout), so the same values up to
        float32 rounding, in fewer and larger matrix products.
        """
        flat = obs.reshape(-1, obs.shape[-1])
        out = np.empty(flat.shape[0], np.float32)
        with torch_threads(self.value_threads or torch.get_num_threads()):
            for lo in range(0, flat.shape[0], VALUE_CHUNK_ROWS):
                rows = slice(lo, lo + VALUE_CHUNK_ROWS)
                out[rows] = model.value(self._tensor(flat[rows])).cpu().numpy()
        return out.reshape(obs.shape[:-1])

    def _record_step(self, t: int, buf: _Buffers, result: StepResult) -> None:
        """Rewards, episode ends and the truncation bootstrap values V(final obs) of step ``t``."""
        cols, model = self.learner_rows, self.model
        buf.rewards[t] = result.rewards[cols]
        buf.terminated[t], buf.truncated[t] = result.terminated[cols], result.truncated[cols]
        self.starts = result.terminated | result.truncated
        if not buf.truncated[t].any():
            return
        rows = np.flatnonzero(buf.truncated[t])
        final = self._tensor(self._normalize(result.final_obs[cols[rows]]))
        if isinstance(model, RecurrentActorCritic):
            assert self.hidden is not None  # V(final obs) continues the episode's memory
            hidden = self.hidden[:, self._tensor(cols[rows])]
            no_start = torch.zeros(rows.size, dtype=torch.bool, device=self.device)
            buf.truncation_values[t, rows] = model.value(final, hidden, no_start).cpu().numpy()
        else:
            buf.truncation_values[t, rows] = model.value(final).cpu().numpy()

    def _step_env(self, chosen: Array) -> StepResult:
        """Step with table indices, or with controls made from continuous / multi-discrete actions."""
        form = self.env_cfg.env.action_form
        if form == "table":
            return self.env.step(chosen)
        if form == "continuous":
            controls = controls_from_continuous(chosen)
        else:
            controls = controls_from_multi_discrete(chosen, self.env_cfg.env.action_bins)
        # only the in-process env steps controls: worker processes are refused for these forms when the
        # collector is built, the RLGym adapter refuses them itself
        assert isinstance(self.env, RocketLeagueVecEnv), f"env.action_form={form} needs the in-process collector"
        return self.env.step(np.zeros(self.env.num_agents, np.int64), controls)

    def _stats(
        self,
        seconds: float,
        T: int,
        episodes: list[dict[str, float]],
        reward_sums: dict[str, float],
        raw_reward_sum: float,
        counters0: tuple[int, float, int],
    ) -> EpisodeStats:
        env = self.env
        game_minutes = max(env.total_agent_seconds - counters0[1], 1e-9) / 60.0
        return EpisodeStats(
            collect_seconds=seconds,
            steps=T * len(self.learner_rows),
            episode_returns=[e["return"] for e in episodes],
            episode_lengths=[e["length_seconds"] for e in episodes],
            touches_per_minute=(env.total_touches - counters0[0]) / game_minutes,
            goals_per_minute=(env.total_goals - counters0[2]) * env.num_cars / game_minutes,
            reward_means={k: v / T for k, v in reward_sums.items()},
            reward_per_step=raw_reward_sum / T,
            episode_metrics=episode_means(episodes),
        )

    def close(self) -> None:
        self.matchmaker.flush()
        self.env.close()
