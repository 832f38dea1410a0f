"""Gymnasium and PettingZoo faces of the Rocket League env, for interop with other libraries.

- :func:`gym_env` -> :class:`RocketLeagueGymEnv`, a single-agent ``gymnasium.Env``: the agent drives
  blue car 0; every other car (teammates and opponents) is driven by ``opponent``.
- :func:`parallel_env` -> :class:`RocketLeagueParallelEnv`, a PettingZoo ``ParallelEnv`` over every
  car of one arena (agents ``blue-0``, ``blue-1``, ..., ``orange-0``, ...; RLGym's names).

Both run one arena of the native :class:`~speedflip.env.vec_env.RocketLeagueVecEnv` built from a
preset (observations, rewards, state setters, done conditions and tick skip come from its ``env``
section). Actions are either lookup-table indices (``Discrete(90)``) or, with
``action_space="continuous"``, raw controls ``Box(8)``: throttle, steer, pitch, yaw, roll in
[-1, 1] (clamped) and jump, boost, handbrake in [0, 1] (pressed above 0.5); NaN or infinite
values are refused.

Episodes end when a goal is scored (``terminated``) or at a time limit (``truncated``); the
observation returned then is the final one, and the next ``reset`` starts a new episode.
``reset(seed=s)`` rebuilds the arena from scratch, so the same seed always gives the same episode
(including the opponent's random choices); ``reset()`` without a seed continues the env's random
stream. These classes are for interop and checking; for training speed use ``speedflip train``
(many arenas at once).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np

try:
    import gymnasium as gym
except ModuleNotFoundError as err:  # an optional extra; say which
    raise ModuleNotFoundError(
        "speedflip's Gymnasium/PettingZoo faces need gymnasium: pip install 'speedflip[faces]'"
    ) from err
from gymnasium import spaces
from gymnasium.error import ResetNeeded
from pydantic import ValidationError

from speedflip._types import Array
from speedflip.config import ConfigError, EnvConfig, load_file, load_preset, preset_names
from speedflip.env.actions import NUM_CONTROLS, ActionError
from speedflip.env.vec_env import RocketLeagueVecEnv, StepResult
from speedflip.selfplay.policies import NeuralPolicy, Policy, RandomPolicy, resolve_policy

_ParallelBase: Any
try:
    from pettingzoo import ParallelEnv as _ParallelBase  # type: ignore[import-untyped, import-not-found, no-redef]
except ImportError:  # the optional 'faces' extra is missing: parallel_env() says how to install it
    _ParallelBase = object

ActionForm = Literal["discrete", "continuous"]
OBS_BOUND = 10.0
"""Bound of the observation Box. Every feature is scaled to order 1 (positions and velocities by
1/2300 uu, angular velocities by 1/pi, boost by 1/100); the largest ones, relative positions across
the whole field, stay below 7."""
PETTINGZOO_HINT = "PettingZoo is not installed: pip install 'speedflip[faces]' (or pip install pettingzoo)"


# ---------------------------------------------------------------------- shared helpers
def face_env_config(preset: str = "1v1", env: dict[str, Any] | None = None) -> EnvConfig:
    """The ``env`` section of a shipped preset (or a YAML config file), one arena, with ``env`` overrides."""
    if preset.endswith((".yaml", ".yml")) or Path(preset).is_file():
        data = load_file(preset)
        source = f"config file '{preset}'"
    else:
        data = load_preset(preset)
        source = f"preset '{preset}'"
    if data.get("gym", {}).get("env_id") is not None or "env" not in data:
        rl = [n for n in preset_names() if "env" in load_preset(n) and load_preset(n).get("gym") is None]
        raise ConfigError(f"{source} is not a Rocket League config (no env section); use one of: {', '.join(rl)}")
    values = {**data["env"], **(env or {}), "num_arenas": 1}
    if "action_form" in EnvConfig.model_fields:  # the face's own action_space decides the form
        values["action_form"] = "table"
    try:
        return EnvConfig.model_validate(values)
    except ValidationError as err:
        problems = "; ".join(f"env.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors())
        raise ConfigError(f"invalid env settings from {source}: {problems}") from None


def _control_space() -> spaces.Box:
    low = np.array([-1.0] * 5 + [0.0] * 3, np.float32)
    return spaces.Box(low, np.ones(NUM_CONTROLS, np.float32), dtype=np.float32)


def _obs_space(obs_dim: int) -> spaces.Box:
    return spaces.Box(-OBS_BOUND, OBS_BOUND, (obs_dim,), np.float32)


def _check_form(action_space: str) -> ActionForm:
    if action_space == "discrete":
        return "discrete"
    if action_space == "continuous":
        return "continuous"
    raise ValueError(
        f"action_space must be 'discrete' (lookup-table index) or 'continuous' (Box(8)), not {action_space!r}"
    )


def _discrete_index(action: Any, num_actions: int, who: str) -> int:
    arr = np.asarray(action)
    if arr.shape != () or not (np.issubdtype(arr.dtype, np.integer) or (arr.dtype.kind == "f" and float(arr) % 1 == 0)):
        raise ActionError(f"{who}: expected one integer action index, got {action!r}")
    index = int(arr)
    if not 0 <= index < num_actions:
        raise ActionError(f"{who}: action index {index} is out of range: valid indices are 0..{num_actions - 1}")
    return index


def _controls(action: Any, who: str) -> Array:
    arr = np.asarray(action, dtype=np.float32)
    if arr.shape != (NUM_CONTROLS,):
        raise ActionError(
            f"{who}: continuous actions are 8 controls (throttle, steer, pitch, yaw, roll, jump, boost, handbrake), "
            f"got shape {list(arr.shape)}"
        )
    if not np.all(np.isfinite(arr)):
        raise ActionError(f"{who}: controls hold NaN or infinite values: {arr.tolist()}")
    return arr


class _Face:
    """One arena of the native env, rebuilt on seeded resets; actions in either form."""

    def __init__(self, env_cfg: EnvConfig, form: ActionForm) -> None:
        if env_cfg.num_arenas != 1:
            raise ConfigError("the Gymnasium/PettingZoo faces run exactly one arena (env.num_arenas = 1)")
        self.env_cfg = env_cfg
        self.form = form
        self.vec = RocketLeagueVecEnv(env_cfg, seed=0, num_threads=1)
        self.obs_dim = self.vec.obs_dim
        self.num_actions = self.vec.num_actions
        self.num_cars = self.vec.num_cars

    def rebuild(self, seed: int) -> None:
        """A fresh arena whose resets draw from ``seed``: nothing carries over from earlier episodes."""
        self.vec.close()
        self.vec = RocketLeagueVecEnv(self.env_cfg, seed=seed, num_threads=1)

    def step(self, indices: Array, controls: Array | None) -> StepResult:
        return self.vec.step(indices, controls)

    def close(self) -> None:
        self.vec.close()


# ---------------------------------------------------------------------- Gymnasium
class RocketLeagueGymEnv(gym.Env[Array, Any]):
    """Single-agent Rocket League: the agent drives blue car 0, ``opponent`` drives every other car.

    ``opponent``: ``rule`` (the scripted baseline), ``idle``, ``random``, or a run directory /
    checkpoint folder (a trained policy; its observation size and action count must match).
    Observation: ``Box(-10, 10, (obs_dim,), float32)``; action: ``Discrete(num_actions)`` or, with
    ``action_space="continuous"``, ``Box(8)`` controls. ``info`` carries ``goal_team`` (-1 none,
    0 blue, 1 orange) and, at the end of an episode, ``episode`` statistics.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - gymnasium's documented class attribute

    def __init__(
        self,
        env_cfg: EnvConfig,
        opponent: str = "rule",
        action_space: str = "discrete",
        deterministic_opponent: bool = False,
    ) -> None:
        super().__init__()
        self.face = _Face(env_cfg, _check_form(action_space))
        self.opponent_spec = opponent
        self.deterministic_opponent = deterministic_opponent
        self.opponent: Policy = resolve_policy(
            opponent, self.face.obs_dim, self.face.vec.actions.table, seed=0, deterministic=deterministic_opponent
        )
        self.observation_space = _obs_space(self.face.obs_dim)
        self.action_space: spaces.Space[Any] = (
            spaces.Discrete(self.face.num_actions) if self.face.form == "discrete" else _control_space()
        )
        self.render_mode = None
        self._all_obs: Array | None = None
        self._seeded = False

    def _reseed_opponent(self, seed: int) -> None:
        if isinstance(self.opponent, RandomPolicy):
            self.opponent.rng = np.random.default_rng(seed)
        elif isinstance(self.opponent, NeuralPolicy):
            self.opponent.generator.manual_seed(seed)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Array, dict[str, Any]]:
        """Start an episode; with ``seed`` the arena is rebuilt and every random choice follows from it."""
        super().reset(seed=seed)
        if seed is not None or not self._seeded:
            sub_seed = int(self.np_random.integers(0, 2**31 - 1))
            self.face.rebuild(sub_seed)
            self._reseed_opponent(sub_seed + 1)
            self._seeded = True
        self._all_obs = self.face.vec.reset()
        return self._all_obs[0].copy(), {"goal_team": -1}

    def step(self, action: Any) -> tuple[Array, float, bool, bool, dict[str, Any]]:
        """Blue car 0 takes ``action``; the opponent policy picks the other cars' actions."""
        if self._all_obs is None:
            raise ResetNeeded("call reset() before step() (and again after an episode ended)")
        vec = self.face.vec
        indices = np.asarray(self.opponent.act(self._all_obs, vec.state, vec.car_teams), np.int64).copy()
        controls = None
        if self.face.form == "discrete":
            indices[0] = _discrete_index(action, self.face.num_actions, "gym_env.step")
        else:
            controls = np.full((self.face.num_cars, NUM_CONTROLS), np.nan, np.float32)
            controls[0] = _controls(action, "gym_env.step")
        result = self.face.step(indices, controls)
        ended = np.flatnonzero(result.terminated | result.truncated)
        if ended.size:
            self.opponent.reset(ended)
        terminated, truncated = bool(result.terminated[0]), bool(result.truncated[0])
        goal = int(result.goal_team[0]) if result.goal_team is not None else -1
        info: dict[str, Any] = {"goal_team": goal}
        if terminated or truncated:
            obs = result.final_obs[0].copy()
            info["episode"] = dict(result.episodes[0]) if result.episodes else {}
            self._all_obs = None
        else:
            obs = result.obs[0].copy()
            self._all_obs = result.obs
        return obs, float(result.rewards[0]), terminated, truncated, info

    def close(self) -> None:
        """Release the arena (safe to call twice)."""
        self.face.close()


# ---------------------------------------------------------------------- PettingZoo
class RocketLeagueParallelEnv(_ParallelBase):  # type: ignore[misc]
    """Every car of one arena as a PettingZoo parallel agent (``blue-0``, ..., ``orange-0``, ...).

    All agents act at once; when a goal or a time limit ends the episode every agent is done
    together and ``agents`` becomes empty until the next ``reset``.
    """

    metadata: dict[str, Any] = {"name": "speedflip_rocket_league_v0", "render_modes": []}  # noqa: RUF012

    def __init__(self, env_cfg: EnvConfig, action_space: str = "discrete") -> None:
        if _ParallelBase is object:
            raise ImportError(PETTINGZOO_HINT)
        self.face = _Face(env_cfg, _check_form(action_space))
        cfg = self.face.env_cfg
        self.possible_agents: list[str] = [f"blue-{i}" for i in range(cfg.blue_size)]
        self.possible_agents += [f"orange-{i}" for i in range(cfg.orange_size)]
        self.agents: list[str] = []
        self.observation_spaces = {a: _obs_space(self.face.obs_dim) for a in self.possible_agents}
        self.action_spaces: dict[str, spaces.Space[Any]] = {
            a: spaces.Discrete(self.face.num_actions) if self.face.form == "discrete" else _control_space()
            for a in self.possible_agents
        }
        self.render_mode = None
        self._seeded = False

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        """The (same, cached) observation space object of ``agent``."""
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space[Any]:
        """The (same, cached) action space object of ``agent``."""
        return self.action_spaces[agent]

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Array], dict[str, dict[str, Any]]]:
        """Start an episode for every car; with ``seed`` the arena is rebuilt and the episode follows from it."""
        if seed is not None or not self._seeded:
            self.face.rebuild(int(seed) if seed is not None else int(np.random.default_rng().integers(0, 2**31 - 1)))
            self._seeded = True
        obs = self.face.vec.reset()
        self.agents = list(self.possible_agents)
        return {a: obs[i].copy() for i, a in enumerate(self.agents)}, {a: {} for a in self.agents}

    def step(
        self, actions: dict[str, Any]
    ) -> tuple[dict[str, Array], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict[str, Any]]]:
        """One action per live agent; returns observations, rewards, terminations, truncations, infos."""
        if not self.agents:
            raise ResetNeeded("no live agents: call reset() to start an episode")
        unknown = sorted(set(actions) - set(self.agents))
        missing = [a for a in self.agents if a not in actions]
        if unknown or missing:
            raise ActionError(
                f"parallel_env.step needs one action per live agent; missing {missing}, unknown {unknown}"
            )
        C = self.face.num_cars
        indices = np.zeros(C, np.int64)
        controls = None if self.face.form == "discrete" else np.zeros((C, NUM_CONTROLS), np.float32)
        for i, agent in enumerate(self.possible_agents):
            who = f"parallel_env.step[{agent!r}]"
            if controls is None:
                indices[i] = _discrete_index(actions[agent], self.face.num_actions, who)
            else:
                controls[i] = _controls(actions[agent], who)
        result = self.face.step(indices, controls)
        done = bool(result.terminated[0] or result.truncated[0])
        source = result.final_obs if done else result.obs
        goal = int(result.goal_team[0]) if result.goal_team is not None else -1
        agents = self.possible_agents
        observations = {a: source[i].copy() for i, a in enumerate(agents)}
        rewards = {a: float(result.rewards[i]) for i, a in enumerate(agents)}
        terminations = {a: bool(result.terminated[i]) for i, a in enumerate(agents)}
        truncations = {a: bool(result.truncated[i]) for i, a in enumerate(agents)}
        infos: dict[str, dict[str, Any]] = {a: {"goal_team": goal} for a in agents}
        if done:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def close(self) -> None:
        """Release the arena (safe to call twice)."""
        self.face.close()


# ---------------------------------------------------------------------- entry points
def gym_env(
    preset: str = "1v1",
    opponent: str = "rule",
    action_space: str = "discrete",
    env: dict[str, Any] | None = None,
    deterministic_opponent: bool = False,
) -> RocketLeagueGymEnv:
    """A single-agent Gymnasium env from a preset (see :class:`RocketLeagueGymEnv`)."""
    return RocketLeagueGymEnv(face_env_config(preset, env), opponent, action_space, deterministic_opponent)


def parallel_env(
    preset: str = "2v2", action_space: str = "discrete", env: dict[str, Any] | None = None
) -> RocketLeagueParallelEnv:
    """A PettingZoo ParallelEnv over every car of one arena (see :class:`RocketLeagueParallelEnv`)."""
    if _ParallelBase is object:
        raise ImportError(PETTINGZOO_HINT)
    return RocketLeagueParallelEnv(face_env_config(preset, env), action_space)


__all__ = [
    "OBS_BOUND",
    "RocketLeagueGymEnv",
    "RocketLeagueParallelEnv",
    "face_env_config",
    "gym_env",
    "parallel_env",
]
