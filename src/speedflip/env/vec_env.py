"""The vectorized Rocket League environment: K arenas, every car an agent, arrays in and out.

Agents are rows ``k * C + c`` (arena ``k``, car ``c``; blue cars first). ``step`` takes one action
index per agent and returns observations, rewards and done flags for all agents; arenas whose
episode ended are reset at once and their final observation is returned for bootstrapping.

Every arena draws its resets from its own random stream, ``np.random.default_rng([seed, index])``
with ``index`` the arena's *global* index (``arena_offset + k``). A process that owns arenas
``[a, b)`` of a larger pool (the multi-process collector) therefore replays exactly the resets the
single-process env would make for those arenas.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import RocketSim as rsim

from speedflip._types import Array
from speedflip.config import EnvConfig
from speedflip.env import conditions
from speedflip.env import layout as L
from speedflip.env.action_forms import table_for
from speedflip.env.actions import NUM_CONTROLS, ActionError, LookupTableAction
from speedflip.env.arenas import Arenas, GameArrays
from speedflip.env.episodes import EpisodeTracker
from speedflip.env.obs import AdvancedObs, DefaultObs, PadTimers
from speedflip.env.rewards import RewardContext, WeightedReward, mode_weights
from speedflip.env.states import make_setter, mechanics_lane


@dataclass
class StepResult:
    """What one ``step`` returns, every array with one row per agent."""

    obs: Array  # [N, obs_dim]: observations to act on next (after any reset)
    rewards: Array  # [N]
    terminated: Array  # [N] bool: a goal ended the episode (no bootstrap)
    truncated: Array  # [N] bool: a time limit ended it (bootstrap from final_obs)
    final_obs: Array  # [N, obs_dim]: the last observation of ended episodes (rows where done)
    # one per arena that finished: return, length_seconds, touches_per_minute, goal + env.episodes.EPISODE_METRICS
    episodes: list[dict[str, float]] = field(default_factory=list)
    goal_team: Array | None = None  # [K]: -1 no goal, 0 blue scored, 1 orange scored (None: not reported)
    touched: Array | None = None  # [K, C] bool: the car touched the ball during this step (before any reset)
    # [K, C] bool: the cars that made the ball's latest touch since the episode began, as it stood after this
    # step and before any reset (None: not reported); a reward's `RewardContext.last_touch` saw the same
    last_touch: Array | None = None


class RocketLeagueVecEnv:
    """Self-play soccar over ``num_arenas`` arenas of ``blue_size`` vs ``orange_size`` cars."""

    worker_restarts: int = 0  # the VecEnv interface: no worker processes, nothing to restart

    def __init__(self, cfg: EnvConfig, seed: int = 0, num_threads: int = 1, arena_offset: int = 0) -> None:
        if arena_offset < 0:
            raise ValueError("arena_offset must be >= 0")
        self.cfg = cfg
        self.seed = seed
        self.arena_offset = arena_offset
        self.arenas = Arenas(
            num_arenas=cfg.num_arenas,
            blue_size=cfg.blue_size,
            orange_size=cfg.orange_size,
            tick_skip=cfg.tick_skip,
            action_delay_ticks=cfg.action_delay_ticks,
            num_threads=num_threads,
            meshes_dir=cfg.meshes_dir,
            seed=seed + arena_offset,
        )
        self.num_arenas = cfg.num_arenas
        self.num_cars = self.arenas.num_cars
        self.num_agents = self.num_arenas * self.num_cars
        self.car_teams = self.arenas.car_teams
        self.actions = table_for(cfg)  # the one place the table is built (workers and match envs use it too)
        pads = self.arenas.arenas[0].get_boost_pads()
        pad_is_big = np.array([p.is_big for p in pads], bool)
        self.pad_timers = PadTimers(cfg.num_arenas, pad_is_big)
        self.obs_builder: DefaultObs | AdvancedObs
        if cfg.obs_builder == "advanced":
            self.obs_builder = AdvancedObs(
                cfg.blue_size, cfg.orange_size, cfg.obs_team_size,
                pad_positions=np.array([p.get_pos().as_numpy() for p in pads], np.float32),
                pad_is_big=pad_is_big, nearest_pads=cfg.nearest_pads, shuffle_slots=cfg.shuffle_slots,
                seed=seed + arena_offset,
            )  # fmt: skip
        else:
            self.obs_builder = DefaultObs(cfg.blue_size, cfg.orange_size, cfg.obs_team_size)
        self.frame_stack = cfg.frame_stack
        self.frame_dim = self.obs_builder.obs_dim
        self.obs_dim = self.frame_dim * self.frame_stack
        self.num_actions = self.actions.num_actions
        first_weights = cfg.reward_phases[0].rewards if cfg.reward_phases else cfg.rewards
        self.reward_fn = WeightedReward({}, team_spirit=cfg.team_spirit, opponent_scale=cfg.opponent_scale)
        self.set_reward_weights(first_weights)
        self.setter_names = [n for n, w in cfg.state_setters.items() if w > 0]
        weights = np.array([cfg.state_setters[n] for n in self.setter_names], np.float64)
        self.setter_probs = weights / weights.sum()
        # the mechanics lane: arenas (by global index) that reset from the mechanics mix once active
        self.mechanics_names = [n for n, w in cfg.mechanics_setters.items() if w > 0]
        weights = np.array([cfg.mechanics_setters[n] for n in self.mechanics_names], np.float64)
        self.mechanics_probs = weights / weights.sum()
        self.mechanics_lane = mechanics_lane(cfg.mechanics_share, arena_offset, cfg.num_arenas)
        self.mechanics_active = cfg.mechanics_from_phase == 0
        self.setters = {
            name: make_setter(name, cfg.state_setter_options.get(name))
            for name in {*self.setter_names, *self.mechanics_names}
        }
        self.rngs = self._seeded_streams(seed)
        self.timeout_ticks = round(cfg.timeout_seconds * L.TICK_RATE)
        self.no_touch_ticks = round(cfg.no_touch_timeout_seconds * L.TICK_RATE)

        K, C = self.num_arenas, self.num_cars
        self.prev_controls = np.zeros((K, C, NUM_CONTROLS), np.float32)
        self.episode_ticks = np.zeros(K, np.int64)
        self.ticks_since_touch = np.zeros(K, np.int64)
        self.episode_returns = np.zeros((K, C), np.float64)
        self.episode_touches = np.zeros((K, C), np.int64)
        self.last_touch = np.zeros((K, C), bool)  # the cars that made the ball's latest touch this episode
        self.prev_scores = np.zeros((K, 2), np.int64)
        self.obs = np.zeros((K * C, self.obs_dim), np.float32)
        self.episode_stats = EpisodeTracker(K, C, cfg.tick_skip)
        self.frames = np.zeros((K, C, self.frame_stack, self.frame_dim), np.float32)
        # running totals for rates (touches per agent-minute of game time)
        self.total_touches = 0
        self.total_agent_seconds = 0.0
        self.total_goals = 0
        self.total_nan_resets = 0  # arenas reset because their physics state held NaN/Inf
        self.sticky_steps = cfg.sticky_buttons_steps
        self.button_hold = np.zeros((K, C, 3), np.int64)  # steps a pressed button stays held

    @property
    def state(self) -> GameArrays:
        return self.arenas.state

    # ------------------------------------------------------------------ reset
    def _reset_arenas(self, ids: Array) -> None:
        mechanics = self.mechanics_lane[ids] & self.mechanics_active
        for k, lane in zip(ids.tolist(), mechanics.tolist(), strict=True):
            rng = self.rngs[k]
            names, probs = (
                (self.mechanics_names, self.mechanics_probs) if lane else (self.setter_names, self.setter_probs)
            )
            name = names[int(rng.choice(len(names), p=probs))]
            self.setters[name](self.arenas.arenas[k], self.arenas.cars[k], rng)
            self.arenas.release_controls(k)
            self.arenas._read(k)
        state = self.arenas.state
        self.prev_controls[ids] = 0.0
        self.button_hold[ids] = 0
        self.episode_ticks[ids] = 0
        self.ticks_since_touch[ids] = 0
        self.episode_returns[ids] = 0.0
        self.episode_touches[ids] = 0
        self.last_touch[ids] = False
        self.prev_scores[ids] = state.scores[ids]
        self.episode_stats.reset(ids, state, mechanics)
        self._observe(ids)

    def _observe(self, ids: Array | None) -> None:
        """Build observations for every arena (after a step) or for the arenas ``ids`` (after their reset).

        With frame stacking, a step shifts each agent's frames by one; a reset fills them all with the
        first frame of the new episode.
        """
        state = self.arenas.state
        if ids is None:
            self.pad_timers.update(state.pads, self.arenas.tick_skip / L.TICK_RATE)
            sub, prev, timers = state, self.prev_controls, self.pad_timers.timers
        else:
            self.pad_timers.update(state.pads, 0.0, ids)
            sub = GameArrays(state.ball[ids], state.cars[ids], state.pads[ids], state.scores[ids])
            prev, timers = self.prev_controls[ids], self.pad_timers.timers[ids]
        if isinstance(self.obs_builder, AdvancedObs):
            frame = self.obs_builder.build(sub, prev, timers)
        else:
            frame = self.obs_builder.build(sub, prev)
        frame = frame.reshape(sub.cars.shape[0], self.num_cars, self.frame_dim)
        if self.frame_stack == 1:
            self.frames[ids if ids is not None else slice(None), :, 0] = frame
        elif ids is None:
            self.frames[:, :, :-1] = self.frames[:, :, 1:]
            self.frames[:, :, -1] = frame
        else:
            self.frames[ids] = frame[:, :, None]
        self.obs[:] = self.frames.reshape(self.num_agents, self.obs_dim)

    def reset(self) -> Array:
        """Start a new episode in every arena; returns observations ``[N, obs_dim]``."""
        self._reset_arenas(np.arange(self.num_arenas))
        return self.obs.copy()

    # ------------------------------------------------------------------ step
    def step(self, actions: Array, custom_controls: Array | None = None) -> StepResult:
        """One decision for every agent, ``tick_skip`` physics ticks for every arena.

        ``custom_controls`` (optional, ``[N, 8]``): raw controls for agents driven by something other
        than the lookup table (a user's scripted bot); rows that are all NaN use ``actions`` instead.
        Analog controls are clamped to [-1, 1] and buttons pressed above 0.5.
        """
        K, C = self.num_arenas, self.num_cars
        idx = self.actions.check(actions, self.num_agents)
        prev_state = self.arenas.state.copy()
        if self.sticky_steps > 1:
            custom_controls = self._sticky(idx, custom_controls)
        if custom_controls is None:
            state = self.arenas.step(idx, self.actions.controls)
            applied = self.actions.table[idx]
        else:
            idx, controls, applied = self._with_custom_controls(idx, custom_controls)
            state = self.arenas.step(idx, controls)
        broken = self._quarantine_non_finite(state)

        touched = state.cars[:, :, 0, L.CAR_HIT_LAST_STEP] > 0.5
        blue_scored = state.scores[:, 0] > self.prev_scores[:, 0]
        orange_scored = state.scores[:, 1] > self.prev_scores[:, 1]
        goal_team = np.where(blue_scored, L.BLUE, np.where(orange_scored, L.ORANGE, -1))
        self.prev_scores[:] = state.scores
        self.prev_controls[:] = applied.reshape(K, C, NUM_CONTROLS)

        any_touch = touched.any(axis=1)
        self.last_touch[any_touch] = touched[any_touch]
        rewards = self.reward_fn(
            RewardContext(state, self.car_teams, touched, goal_team, prev_state, last_touch=self.last_touch)
        )
        self.episode_ticks += self.arenas.tick_skip
        self.ticks_since_touch = np.where(any_touch, 0, self.ticks_since_touch + self.arenas.tick_skip)
        self.episode_returns += self.reward_fn.last_shaped  # each car's own earnings, before any zero-sum sharing
        self.episode_touches += touched
        n_touches = int(touched.sum())
        self.total_touches += n_touches
        self.total_agent_seconds += self.num_agents * self.arenas.tick_skip / L.TICK_RATE
        self.total_goals += int((goal_team >= 0).sum())
        self.episode_stats.step(state, prev_state, touched)

        rewards[broken] = 0.0
        terminated = conditions.goal_scored(goal_team) | broken  # no bootstrap from a broken state
        truncated = ~terminated & (
            conditions.timeout(self.episode_ticks, self.timeout_ticks)
            | conditions.no_touch_timeout(self.ticks_since_touch, self.no_touch_ticks)
        )
        self._observe(None)
        done = terminated | truncated
        final_obs = self.obs.copy()
        last_touch = self.last_touch.copy()  # a reset below clears the ended arenas' rows
        episodes: list[dict[str, float]] = []
        if done.any():
            ids = np.flatnonzero(done)
            for k, metrics in zip(ids.tolist(), self.episode_stats.finish(ids, state), strict=True):
                seconds = self.episode_ticks[k] / L.TICK_RATE
                episodes.append(
                    {
                        "return": float(self.episode_returns[k].mean()),
                        "length_seconds": float(seconds),
                        "touches_per_minute": float(self.episode_touches[k].mean() * 60.0 / max(seconds, 1e-6)),
                        "goal": float(terminated[k]),
                        **metrics,
                    }
                )
            self._reset_arenas(ids)
        return StepResult(
            obs=self.obs.copy(),
            rewards=rewards.reshape(K * C),
            terminated=np.repeat(terminated, C),
            truncated=np.repeat(truncated, C),
            final_obs=final_obs,
            episodes=episodes,
            goal_team=goal_team,
            touched=touched,
            last_touch=last_touch,
        )

    def _sticky(self, idx: Array, custom: Array | None) -> Array | None:
        """Sticky buttons: a pressed jump/boost/handbrake stays pressed for ``sticky_buttons_steps`` steps.

        Agents whose held buttons change their table row are driven through the custom-controls path
        (the table itself is never remapped); returns the custom controls to apply (or None)."""
        requested = self.actions.table[idx]
        if custom is not None:
            rows = ~np.isnan(np.asarray(custom, np.float32)).all(axis=1)
            requested = np.where(rows[:, None], np.asarray(custom, np.float32), requested)
        hold = self.button_hold.reshape(self.num_agents, 3)
        buttons = np.maximum(requested[:, 5:] > 0.5, hold > 0)
        pressed = requested[:, 5:] > 0.5
        hold[:] = np.where(pressed, self.sticky_steps - 1, np.maximum(hold - 1, 0))
        changed = buttons != (self.actions.table[idx][:, 5:] > 0.5)
        if custom is None and not changed.any():
            return None
        out = np.full((self.num_agents, NUM_CONTROLS), np.nan, np.float32)
        use = changed.any(axis=1) if custom is None else (changed.any(axis=1) | rows)
        final = requested.copy()
        final[:, 5:] = buttons
        out[use] = final[use]
        return out

    def _quarantine_non_finite(self, state: GameArrays) -> Array:
        """``[K]`` arenas whose physics state holds NaN/Inf: their arrays are zeroed (nothing non-finite
        reaches observations, rewards or the learner), the episode ends and the arena is reset; counted
        in ``total_nan_resets``."""
        finite = np.isfinite(state.ball).all(axis=(1, 2)) & np.isfinite(state.cars).all(axis=(1, 2, 3))
        broken: Array = ~finite
        if broken.any():
            state.ball[broken] = 0.0
            state.cars[broken] = 0.0
            self.total_nan_resets += int(broken.sum())
        return broken

    def _with_custom_controls(self, idx: Array, custom: Array) -> tuple[Array, list[rsim.CarControls], Array]:
        custom = np.asarray(custom, np.float32)
        if custom.shape != (self.num_agents, NUM_CONTROLS):
            raise ActionError(
                f"custom controls must have shape [{self.num_agents}, {NUM_CONTROLS}], got {list(custom.shape)}"
            )
        nan_rows = np.isnan(custom)
        use = ~nan_rows.all(axis=1)
        if np.any(nan_rows[use]) or not np.all(np.isfinite(custom[use])):
            bad = int(np.flatnonzero(use & ~np.isfinite(custom).all(axis=1))[0])
            raise ActionError(f"custom controls for agent {bad} hold NaN or infinite values: {custom[bad].tolist()}")
        clean = custom[use].copy()
        clean[:, :5] = np.clip(clean[:, :5], -1.0, 1.0)
        clean[:, 5:] = (clean[:, 5:] > 0.5).astype(np.float32)
        controls = list(self.actions.controls) + [LookupTableAction._to_controls(row) for row in clean]
        idx = idx.copy()
        idx[use] = self.num_actions + np.arange(int(use.sum()))
        applied = np.where(use[:, None], 0.0, self.actions.table[np.minimum(idx, self.num_actions - 1)])
        applied[use] = clean
        return idx, controls, applied.astype(np.float32)

    # ------------------------------------------------------------------ RNG state
    def _seeded_streams(self, seed: int) -> list[np.random.Generator]:
        return [np.random.default_rng([seed, self.arena_offset + k]) for k in range(self.num_arenas)]

    def get_rng_state(self) -> dict[str, Any]:
        """The reset streams of every arena as JSON-able data (for checkpoints)."""
        return {
            "format": "per-arena-v1",
            "arena_offset": self.arena_offset,
            "arenas": [rng.bit_generator.state for rng in self.rngs],
        }

    def set_rng_state(self, state: dict[str, Any]) -> None:
        """Restore streams saved by :meth:`get_rng_state`.

        Arenas beyond the saved ones (the run now has more arenas) keep their freshly seeded
        streams. A legacy single-stream state (a numpy ``bit_generator.state`` dict) reseeds every
        arena's stream from one number drawn from it, so old checkpoints still resume deterministically.
        """
        if "bit_generator" in state:
            legacy = np.random.default_rng()
            legacy.bit_generator.state = state
            self.rngs = self._seeded_streams(int(legacy.integers(0, 2**63 - 1)))
            return
        if state.get("format") != "per-arena-v1":
            raise ValueError(f"unknown RNG state format {state.get('format')!r}; expected 'per-arena-v1'")
        saved = state["arenas"]
        first = self.arena_offset - int(state.get("arena_offset", 0))
        for k, rng in enumerate(self.rngs):
            if 0 <= first + k < len(saved):
                rng.bit_generator.state = saved[first + k]

    def set_reward_weights(self, weights: dict[str, float]) -> None:
        """Switch reward weights (a reward phase); the env's reward mode and scales are applied."""
        cfg = self.cfg
        self.reward_fn.set_weights(mode_weights(weights, cfg.reward_mode, cfg.sparse_scale, cfg.dense_scale))

    def set_mechanics_active(self, active: bool) -> None:
        """Switch the mechanics lane on or off (the trainer does when the reward phase reaches
        ``env.mechanics_from_phase``). Lane arenas pick their setter from ``env.mechanics_setters`` at
        their next reset while it is on; running episodes are not interrupted."""
        self.mechanics_active = bool(active)

    def reward_means(self) -> dict[str, float]:
        """Mean of every reward component over all agents in the last step."""
        return dict(self.reward_fn.last_means)

    def describe(self) -> dict[str, Any]:
        """A summary for the start-of-run table."""
        return {
            "arenas": self.num_arenas,
            "agents": self.num_agents,
            "team_sizes": f"{self.cfg.blue_size}v{self.cfg.orange_size}",
            "obs_dim": self.obs_dim,
            "actions": self.actions.coverage.summary(),
            "tick_skip": self.cfg.tick_skip,
            "action_delay_ticks": self.cfg.action_delay_ticks,
        }

    def close(self) -> None:
        """Stop the physics threads."""
        self.arenas.close()
