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
from speedflip.collect import Backend, make_vec_env, missing_capabilities, required_capabilities, unsupported_message
from speedflip.collect.base import VecEnv
from speedflip.collect.multiprocess import CollectorError, MultiProcessVecEnv
from speedflip.collect.pipelined import PipelinedVecEnv
from speedflip.config import Config, ConfigError
from speedflip.device import torch_threads
from speedflip.env.action_forms import action_mask, controls_from_continuous, controls_from_multi_discrete
from speedflip.env.actions import NUM_CONTROLS
from speedflip.env.arenas import GameArrays
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


@dataclass(frozen=True)
class _Part:
    """Arenas ``[k0, k1)`` (agents ``[a0, a1)``) acted for together: every arena at once, or one group of a
    pipelined collector. ``pos``: the rollout columns of the part's learner rows, ``local``: those rows
    counted from ``a0``."""

    k0: int
    k1: int
    a0: int
    a1: int
    pos: Array
    local: Array

    @classmethod
    def of(cls, k0: int, k1: int, num_cars: int, learner_cols: Array) -> _Part:
        a0, a1 = k0 * num_cars, k1 * num_cars
        pos = np.flatnonzero((learner_cols >= a0) & (learner_cols < a1))
        return cls(k0, k1, a0, a1, pos, learner_cols[pos] - a0)


@dataclass
class _Tally:
    """What a rollout sums over its steps for its statistics."""

    episodes: list[dict[str, float]]
    reward_sums: dict[str, float]
    raw_reward_sum: float = 0.0


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
        self.arena_env: RocketLeagueVecEnv | MultiProcessVecEnv | PipelinedVecEnv | None = (
            self.env if isinstance(self.env, (RocketLeagueVecEnv, MultiProcessVecEnv, PipelinedVecEnv)) else None
        )
        self.masking = env_cfg.action_masking and env_cfg.action_form == "table"
        backend: Backend | None = None
        if isinstance(self.env, MultiProcessVecEnv):
            backend = "multiprocess"
        elif isinstance(self.env, PipelinedVecEnv):
            backend = "pipelined"
        if backend is not None:
            # make_vec_env builds worker processes only for configs they can drive (choose_collector checks
            # the capabilities first); this guards against a backend built some other way
            missing = missing_capabilities(backend, required_capabilities(self.env_cfg))
            if missing:
                self.env.close()
                raise ConfigError(unsupported_message(backend, missing))
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
        tally = _Tally(episodes=[], reward_sums={})
        counters0 = (env.total_touches, env.total_agent_seconds, env.total_goals)
        start = time.perf_counter()
        if isinstance(env, PipelinedVecEnv):
            self._pipelined_steps(env, buf, tally, global_step)
        else:
            whole = _Part.of(0, env.num_arenas, env.num_cars, cols)
            for t in range(T):
                if self.hidden is not None and t % L == 0:
                    states[t // L] = self.hidden[:, cols].cpu()
                result = self._step_env(self._act(t, buf, whole, self._state()))
                self._after_step(t, buf, result, whole, env.reward_means(), tally, global_step)
        last_obs = self._normalize(self.obs[cols])
        if isinstance(model, RecurrentActorCritic):
            assert self.hidden is not None
            hidden = self.hidden[:, self._tensor(cols)]
            last_values = model.value(self._tensor(last_obs), hidden, self._tensor(self.starts[cols])).cpu().numpy()
        else:
            buf.values, last_values = self._values(model, buf.obs), self._values(model, last_obs)
        stats = self._stats(time.perf_counter() - start, T, tally, counters0)
        return Rollout(
            obs=buf.obs, raw_obs=buf.raw_obs, actions=buf.actions, log_probs=buf.log_probs, values=buf.values,
            rewards=buf.rewards, terminated=buf.terminated, truncated=buf.truncated,
            truncation_values=buf.truncation_values, last_values=last_values, stats=stats, masks=buf.masks,
            starts=buf.starts if recurrent else None, states=states if recurrent else None,
            teacher_actions=buf.teacher_actions,
        )  # fmt: skip

    def _pipelined_steps(self, env: PipelinedVecEnv, buf: _Buffers, tally: _Tally, global_step: int) -> None:
        """The rollout's steps group by group: the parent acts for one group while the other's workers step.

        Group ``g``'s step ``t`` starts as soon as its step ``t - 1`` is recorded, so every group plays exactly
        the sequence of decisions it would play alone; only the order of the parent's work changes.
        """
        parts = [_Part.of(k0, k1, env.num_cars, self.learner_rows) for k0, k1 in env.spans]
        T = buf.rewards.shape[0]
        try:
            for t in range(T + 1):
                for index, (group, part) in enumerate(zip(env.groups, parts, strict=True)):
                    if t > 0:
                        result = group.step_wait()
                        means = env.group_reward_means(index)
                        self._after_step(t - 1, buf, result, part, means, tally, global_step)
                    if t < T:
                        group.step_async(self._act(t, buf, part, group.state))
        finally:
            env.settle()  # an interrupted rollout leaves no step running (the checkpoint asks the workers next)

    def _state(self) -> GameArrays | None:
        """Every arena's state, when this process can read it (not through the RLGym adapter)."""
        return self.arena_env.state if self.arena_env is not None else None

    def _act(self, t: int, buf: _Buffers, part: _Part, state: GameArrays | None) -> Array:
        """The actions of the agents of ``part`` at step ``t`` (learner rows sampled, pool opponents filled in);
        ``state``: the part's arenas (None: not readable here)."""
        model = self.model
        obs = self.obs[part.a0 : part.a1]
        normalized = self._normalize(obs)
        buf.raw_obs[t, part.pos] = obs[part.local]
        buf.obs[t, part.pos] = normalized[part.local]
        rule_actions: Array | None = None  # the rule bot's rows for every car, asked once per step
        if buf.teacher_actions is not None and self.teacher is not None and state is not None:
            rule_actions = self.teacher.act(state, self.car_teams)
            buf.teacher_actions[t, part.pos] = rule_actions[part.local]
        mask = None
        if buf.masks is not None and state is not None:
            mask = action_mask(state, self.car_teams, self.env.actions.table)
            buf.masks[t, part.pos] = mask[part.local]
        value: torch.Tensor | None = None  # feed-forward: the values come after the rollout (_values)
        if isinstance(model, RecurrentActorCritic):
            assert self.hidden is not None and part.a0 == 0 and part.a1 == self.env.num_agents  # one part only
            buf.starts[t, part.pos] = self.starts[part.a0 : part.a1][part.local]
            action, log_prob, value, self.hidden = model.act(
                self._tensor(normalized), self.hidden, self._tensor(self.starts)
            )
        else:
            action, log_prob = model.sample(self._tensor(normalized), mask=None if mask is None else self._tensor(mask))
        chosen: Array = action.cpu().numpy()
        if self.matchmaker.pool_arenas:
            chosen = self.matchmaker.fill_opponent_actions(chosen, obs, state, rule_actions, first_arena=part.k0)
        buf.actions[t, part.pos] = chosen[part.local]
        buf.log_probs[t, part.pos] = log_prob.cpu().numpy()[part.local]
        if value is not None:
            buf.values[t, part.pos] = value.cpu().numpy()[part.local]
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

    def _after_step(
        self,
        t: int,
        buf: _Buffers,
        result: StepResult,
        part: _Part,
        reward_means: dict[str, float],
        tally: _Tally,
        global_step: int,
    ) -> None:
        """Everything step ``t`` of ``part`` leaves: the live view, rated pool games, rewards, episode ends and
        truncation bootstraps, the statistics (``reward_means``: the components' means, weighted by the part's
        share of the arenas) and the next observations."""
        if self.step_hook is not None:
            self.step_hook()
        self.matchmaker.on_step(result.terminated, result.truncated, result.goal_team, global_step, first_arena=part.k0)
        tally.raw_reward_sum += float(result.rewards[part.local].sum()) / len(self.learner_rows)
        for name, mean in reward_means.items():
            tally.reward_sums[name] = tally.reward_sums.get(name, 0.0) + mean
        self._record_step(t, buf, result, part)
        tally.episodes += result.episodes
        self.obs[part.a0 : part.a1] = result.obs

    def _record_step(self, t: int, buf: _Buffers, result: StepResult, part: _Part) -> None:
        """Rewards, episode ends and the truncation bootstrap values V(final obs) of step ``t`` of ``part``."""
        model, pos, local = self.model, part.pos, part.local
        buf.rewards[t, pos] = result.rewards[local]
        buf.terminated[t, pos], buf.truncated[t, pos] = result.terminated[local], result.truncated[local]
        self.starts[part.a0 : part.a1] = result.terminated | result.truncated
        truncated = result.truncated[local]
        if not truncated.any():
            return
        rows = np.flatnonzero(truncated)
        final = self._tensor(self._normalize(result.final_obs[local[rows]]))
        if isinstance(model, RecurrentActorCritic):
            assert self.hidden is not None  # V(final obs) continues the episode's memory
            hidden = self.hidden[:, self._tensor(part.a0 + local[rows])]
            no_start = torch.zeros(rows.size, dtype=torch.bool, device=self.device)
            buf.truncation_values[t, pos[rows]] = model.value(final, hidden, no_start).cpu().numpy()
        else:
            buf.truncation_values[t, pos[rows]] = model.value(final).cpu().numpy()

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

    def _stats(self, seconds: float, T: int, tally: _Tally, counters0: tuple[int, float, int]) -> EpisodeStats:
        env = self.env
        episodes = tally.episodes
        game_minutes = max(env.total_agent_seconds - counters0[1], 1e-9) / 60.0
        return EpisodeStats(
            collect_seconds=seconds,
            steps=T * len(self.learner_rows),
            episode_returns=[e["return"] for e in episodes],
            episode_lengths=[e["length_seconds"] for e in episodes],
            touches_per_minute=(env.total_touches - counters0[0]) / game_minutes,
            goals_per_minute=(env.total_goals - counters0[2]) * env.num_cars / game_minutes,
            reward_means={k: v / T for k, v in tally.reward_sums.items()},
            reward_per_step=tally.raw_reward_sum / T,
            episode_metrics=episode_means(episodes),
        )

    def close(self) -> None:
        self.matchmaker.flush()
        self.env.close()
