"""Train RLGym v2 environments with speedflip: K copies of an RLGym env behind the VecEnv interface.

An RLGym v2 user already has a function that builds an ``rlgym.api.RLGym`` env from components
(ObsBuilder, ActionParser, RewardFunction, StateMutator, DoneConditions, usually with
``rlgym.rocket_league.sim.RocketSimEngine``). Point the config at it::

    env:
      rlgym: "my_bot.env:build_env"        # or "path/to/env.py:build_env"
      num_arenas: 16                      # the function is called once per arena
      blue_size: 1                        # must match the env's team sizes
      orange_size: 1

and ``speedflip train`` runs those envs through the same trainer (PPO, checkpoints, metrics) as
the native env. From Python: :meth:`RLGymVecEnv.from_factory`, :meth:`RLGymVecEnv.from_env` or
:meth:`RLGymVecEnv.from_components`.

**This is the slower path.** Every copy runs RLGym's own per-env Python loop (observations,
rewards and conditions are built per agent in Python, the engine converts the state per tick), one
copy after another in this process. The native env (``env.rlgym`` unset) computes the same things
over arrays for all arenas at once and is several times faster; measure with ``speedflip bench``.

Rules the adapter checks (with an error that says what to change):

- every copy has the same agents after every reset (fixed team sizes); agents are ordered blue
  first, then orange, as in the native env;
- every agent's observation is a flat numeric vector of one size, the same for all agents;
- every agent's action space is discrete with the same number of actions (``('discrete', n)``, as
  RLGym's ``LookupTableAction`` declares it, or a ``gymnasium.spaces.Discrete``); the trainer
  passes one integer per agent as a ``[1]`` array, which ``LookupTableAction`` and ``RepeatAction``
  accept.

Not supported: different observation sizes per agent, continuous or multi-discrete action
spaces, variable team sizes, dict/tuple/image observations, the multi-process collector and
curriculum stages (the factory decides the team size), speedflip's reward weights and phases
(the rewards are the env's own ``RewardFunction``).

Seeding: RLGym components draw from Python's ``random`` and numpy's global generator (e.g.
``KickoffMutator``), so the adapter seeds both from the run seed and saves/restores them in
checkpoints. Copies are stepped in a fixed order, so a run is reproducible for a given seed.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import os
import random
import sys
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from speedflip._types import Array
from speedflip.config import ConfigError
from speedflip.env import layout as L
from speedflip.env.actions import NUM_CONTROLS, LookupTableAction, TableCoverage, coverage_fields
from speedflip.env.vec_env import StepResult

if TYPE_CHECKING:
    from speedflip.config import Config

RLGymFactory = Callable[[], Any]
"""A function with no arguments returning a new ``rlgym.api.RLGym`` env (a fresh one per call)."""

SLOW_PATH_NOTE = (
    "RLGym v2 per-env Python loop (slower than the native vectorized env: observations, rewards and "
    "conditions are computed per agent in Python, one arena after another)"
)
RNG_FORMAT = "rlgym-global-v1"
SPEC_FORM = "'package.module:function' or 'path/to/file.py:function'"


class RLGymAdapterError(ConfigError):
    """An RLGym env, factory or component that the adapter cannot run; the message says why."""


# ---------------------------------------------------------------------- loading a factory
def load_factory(spec: str) -> RLGymFactory:
    """``"package.module:function"`` or ``"path/to/file.py:function"`` -> the function.

    Modules are looked up on the Python path and in the current directory.
    """
    module_text, sep, func_name = spec.rpartition(":")
    if not sep or not module_text or not func_name or not func_name.isidentifier():
        raise RLGymAdapterError(
            f"env.rlgym '{spec}' must name a factory function as {SPEC_FORM}, e.g. 'my_bot.env:build_env'"
        )
    if module_text.endswith(".py") or "/" in module_text or os.sep in module_text:
        module = _import_file(Path(module_text), spec)
    else:
        module = _import_module(module_text, spec)
    func = vars(module).get(func_name)
    if func is None:
        public = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise RLGymAdapterError(
            f"env.rlgym '{spec}': module '{module_text}' has no function '{func_name}' "
            f"(callables there: {', '.join(public[:20]) or 'none'}); expected {SPEC_FORM}"
        )
    if not callable(func):
        raise RLGymAdapterError(f"env.rlgym '{spec}': '{func_name}' is a {type(func).__name__}, not a function")
    factory: RLGymFactory = func
    return factory


def _import_module(name: str, spec: str) -> Any:
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.append(cwd)  # `speedflip` runs as a console script: let it find the user's modules
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name is not None and name.startswith(err.name.split(".")[0]):
            raise RLGymAdapterError(
                f"env.rlgym '{spec}': cannot import module '{name}' ({err}). Expected {SPEC_FORM}; the module "
                "must be importable from the current directory or the Python path (pip install -e your package)"
            ) from None
        raise RLGymAdapterError(f"env.rlgym '{spec}': importing '{name}' failed: {err}") from None
    except Exception as err:  # a user's module can raise anything on import; report it plainly
        raise RLGymAdapterError(f"env.rlgym '{spec}': importing '{name}' failed: {type(err).__name__}: {err}") from None


def _import_file(path: Path, spec: str) -> Any:
    if not path.is_file():
        raise RLGymAdapterError(f"env.rlgym '{spec}': file '{path}' does not exist; expected {SPEC_FORM}")
    module_spec = importlib.util.spec_from_file_location(f"speedflip_rlgym_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise RLGymAdapterError(f"env.rlgym '{spec}': cannot import '{path}' as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as err:  # a user's file can raise anything on import; report it plainly
        raise RLGymAdapterError(f"env.rlgym '{spec}': importing '{path}' failed: {type(err).__name__}: {err}") from None
    return module


def _callable_name(func: Callable[..., Any]) -> str:
    if isinstance(func, (types.FunctionType, types.MethodType)):
        return f"{func.__module__}:{func.__qualname__}"
    return type(func).__name__


def _checked_env(obj: Any, source: str) -> Any:
    from rlgym.api import RLGym

    if not isinstance(obj, RLGym):
        raise RLGymAdapterError(
            f"{source} returned a {type(obj).__module__}.{type(obj).__name__}; expected an rlgym.api.RLGym env "
            "(RLGym v2: RLGym(state_mutator=..., obs_builder=..., action_parser=..., reward_fn=..., "
            "transition_engine=RocketSimEngine(), ...))"
        )
    return obj


def _call_factory(factory: RLGymFactory, source: str) -> Any:
    try:
        env = factory()
    except Exception as err:  # the user's factory can raise anything; say where it came from
        raise RLGymAdapterError(f"{source} raised {type(err).__name__}: {err}") from err
    return _checked_env(env, source)


# ---------------------------------------------------------------------- actions
@dataclass(frozen=True)
class RLGymCoverage(TableCoverage):
    """Coverage of the controls an RLGym action parser produces per action index."""

    parser: str = ""
    fixed_table: bool = True

    def summary(self) -> str:
        if not self.fixed_table:
            return (
                f"{self.num_actions} discrete actions from RLGym parser {self.parser} (its controls depend on the "
                "game state, so no fixed table is shown)"
            )
        return f"{super().summary()} (from RLGym parser {self.parser})"


class RLGymActionTable(LookupTableAction):
    """The actions of an RLGym discrete parser, as speedflip's lookup-table interface.

    ``table[i]`` holds the controls the parser produced for index ``i`` on the first game state
    (the first tick if the parser repeats actions). Unlike speedflip's own tables it is not
    required to cover every control: the table is the user's. If the parser's output is not a fixed
    ``[8]`` / ``[ticks, 8]`` control array, the table is all zeros and ``coverage.fixed_table`` is
    False. Only used for reporting and for index checks; the parser itself turns indices into controls.
    """

    def __init__(self, table: Array, parser_name: str, fixed_table: bool) -> None:
        # speedflip's validation (full coverage, a neutral row) is deliberately not applied here
        self.table = np.ascontiguousarray(table, dtype=np.float32)
        self.controls = []
        self.coverage = _coverage(self.table, parser_name, fixed_table)


def _coverage(table: Array, parser: str, fixed_table: bool) -> RLGymCoverage:
    return RLGymCoverage(**coverage_fields(table), parser=parser, fixed_table=fixed_table)


def _is_gym_discrete(space: Any) -> bool:
    try:
        from gymnasium.spaces import Discrete
    except ImportError:  # gymnasium is optional here: RLGym's own spaces are tuples
        return False
    return isinstance(space, Discrete)


def discrete_action_count(space: Any, agent: Any) -> int:
    """The number of actions of an RLGym action space; only discrete spaces are supported."""
    if _is_gym_discrete(space):
        return int(space.n)
    if (
        isinstance(space, tuple)
        and len(space) == 2
        and space[0] == "discrete"
        and isinstance(space[1], (int, np.integer))
    ):
        return int(space[1])
    raise RLGymAdapterError(
        f"agent {agent!r} has action space {space!r}; speedflip trains a discrete policy, so the action parser "
        "must declare ('discrete', n) like RLGym's LookupTableAction (wrap it in RepeatAction for tick skip) or "
        "a gymnasium Discrete space. Continuous and multi-discrete RLGym parsers are not supported"
    )


def _probe_table(env: Any, agent: Any, num_actions: int) -> tuple[Array, bool]:
    """Ask the parser for the controls of every index (documented ``parse_actions`` API)."""
    parser, state, shared = env.action_parser, env.state, env.shared_info
    rows = np.zeros((num_actions, NUM_CONTROLS), np.float32)
    for i in range(num_actions):
        parsed = parser.parse_actions({agent: np.array([i], np.int64)}, state, shared)
        value = np.asarray(parsed[agent], dtype=np.float32)
        if value.ndim == 2 and value.shape[1] == NUM_CONTROLS and value.shape[0] >= 1:
            value = value[0]
        if value.shape != (NUM_CONTROLS,):
            return np.zeros((num_actions, NUM_CONTROLS), np.float32), False
        rows[i] = value
    return rows, True


# ---------------------------------------------------------------------- the vectorized env
class RLGymVecEnv:
    """``num_arenas`` RLGym v2 envs behind speedflip's VecEnv interface (the slower, per-env path).

    Agents are rows ``k * C + c`` (copy ``k``, car ``c``; blue first), exactly as in the native env.
    When any agent of a copy is terminated or truncated the copy is reset at once; agents of that
    copy that were not terminated count as truncated (their value is bootstrapped from the final
    observation, returned in ``final_obs``).
    """

    worker_restarts: int = 0  # in-process: no collection workers to restart

    def __init__(self, envs: Sequence[Any], seed: int = 0, source: str = "RLGym envs", seed_global_rngs: bool = True):
        if not envs:
            raise RLGymAdapterError("RLGymVecEnv needs at least one RLGym env")
        if len({id(env) for env in envs}) != len(envs):
            raise RLGymAdapterError(
                "the same RLGym env object was given for two arenas; each arena needs its own env (components keep "
                "per-episode state): call your factory once per arena"
            )
        self.envs = [_checked_env(env, source) for env in envs]
        self.source = source
        self.seed = seed
        if seed_global_rngs:
            random.seed(seed)
            np.random.seed(seed % 2**32)
        self.num_arenas = len(self.envs)
        self.agent_ids: list[list[Any]] = [[] for _ in self.envs]
        first = [self._reset_env(k, probe=True) for k in range(self.num_arenas)]
        counts = {len(ids) for ids in self.agent_ids}
        if len(counts) != 1:
            raise RLGymAdapterError(
                f"the RLGym copies have different numbers of agents {sorted(counts)}; every arena needs the same team "
                "sizes (speedflip batches all agents of all arenas together)"
            )
        self.num_cars = counts.pop()
        if self.num_cars == 0:
            raise RLGymAdapterError("the RLGym env has no agents after reset (no cars: add a FixedTeamSizeMutator)")
        self.num_agents = self.num_arenas * self.num_cars
        self.car_teams = self._teams(0)
        dims = {(k, a): np.shape(obs[a]) for k, obs in enumerate(first) for a in self.agent_ids[k]}
        shapes = set(dims.values())
        if len(shapes) != 1:
            detail = ", ".join(f"{a!r}: {list(s)}" for (_, a), s in list(dims.items())[:8])
            raise RLGymAdapterError(
                f"agents have different observation shapes ({detail}); speedflip's policy takes one flat vector size "
                "for every agent. Pad the observation to a fixed size (e.g. DefaultObs(zero_padding=3))"
            )
        shape = shapes.pop()
        if len(shape) != 1 or shape[0] < 1:
            raise RLGymAdapterError(
                f"observations have shape {list(shape)}; speedflip needs a flat 1-D vector per agent "
                "(dict, tuple and image observations are not supported: flatten them in your ObsBuilder)"
            )
        self.obs_dim = int(shape[0])
        self.num_actions = self._action_count()
        env0 = self.envs[0]
        table, fixed = _probe_table(env0, self.agent_ids[0][0], self.num_actions)
        self.actions: LookupTableAction = RLGymActionTable(table, type(env0.action_parser).__name__, fixed)
        K, C = self.num_arenas, self.num_cars
        self.obs = np.zeros((K * C, self.obs_dim), np.float32)
        self.episode_returns = np.zeros((K, C), np.float64)
        self.episode_touches = np.zeros((K, C), np.int64)
        self.start_ticks = np.zeros(K, np.int64)
        self.last_ticks = np.zeros(K, np.int64)
        self.goal_seen = np.zeros(K, bool)
        self.total_touches = 0
        self.total_agent_seconds = 0.0
        self.total_goals = 0
        self._last_reward_mean = 0.0

    # ------------------------------------------------------------------ construction helpers
    @classmethod
    def from_factory(
        cls, factory: RLGymFactory | str, num_arenas: int, seed: int = 0, seed_global_rngs: bool = True
    ) -> RLGymVecEnv:
        """Call ``factory`` (a function, or a ``'module:function'`` / ``'file.py:function'`` path) once per arena."""
        if num_arenas < 1:
            raise RLGymAdapterError("num_arenas must be at least 1")
        func = load_factory(factory) if isinstance(factory, str) else factory
        label = f"RLGym factory '{factory if isinstance(factory, str) else _callable_name(factory)}'"
        envs = [_call_factory(func, label) for _ in range(num_arenas)]
        return cls(envs, seed=seed, source=label, seed_global_rngs=seed_global_rngs)

    @classmethod
    def from_env(cls, env: Any, num_arenas: int = 1, seed: int = 0, seed_global_rngs: bool = True) -> RLGymVecEnv:
        """One RLGym env (used for arena 0) plus ``num_arenas - 1`` copies of it.

        Copies deep-copy the env's components and get a new ``RocketSimEngine`` with the same
        ``rlbot_delay``; other transition engines cannot be copied (pass a factory instead).
        """
        _checked_env(env, "from_env")
        return cls([env] + [_copy_env(env) for _ in range(num_arenas - 1)], seed, "RLGym env", seed_global_rngs)

    @classmethod
    def from_components(
        cls,
        num_arenas: int,
        *,
        obs_builder: Any,
        action_parser: Any,
        reward_fn: Any,
        state_mutator: Any,
        termination_cond: Any = None,
        truncation_cond: Any = None,
        shared_info_provider: Any = None,
        rlbot_delay: bool = True,
        seed: int = 0,
        seed_global_rngs: bool = True,
    ) -> RLGymVecEnv:
        """Build ``num_arenas`` RLGym envs from v2 components on ``RocketSimEngine``.

        Each arena gets deep copies of the components (they keep per-episode state), so the objects
        passed in are left untouched.
        """
        from rlgym.api import RLGym
        from rlgym.rocket_league.sim import RocketSimEngine

        parts = {
            "state_mutator": state_mutator,
            "obs_builder": obs_builder,
            "action_parser": action_parser,
            "reward_fn": reward_fn,
            "termination_cond": termination_cond,
            "truncation_cond": truncation_cond,
            "shared_info_provider": shared_info_provider,
        }
        envs = [
            RLGym(**copy.deepcopy(parts), transition_engine=RocketSimEngine(rlbot_delay=rlbot_delay))
            for _ in range(num_arenas)
        ]
        return cls(envs, seed, "RLGym components", seed_global_rngs)

    # ------------------------------------------------------------------ per-copy helpers
    def _ordered_agents(self, env: Any) -> list[Any]:
        from rlgym.rocket_league.api import GameState

        agents = list(env.agents)
        state = env.state
        if isinstance(state, GameState):
            agents.sort(key=lambda a: int(state.cars[a].team_num))  # stable: blue first, then orange
        return agents

    def _teams(self, k: int) -> Array:
        from rlgym.rocket_league.api import GameState

        state = self.envs[k].state
        if not isinstance(state, GameState):
            return np.zeros(len(self.agent_ids[k]), np.int64)
        return np.array([int(state.cars[a].team_num) for a in self.agent_ids[k]], np.int64)

    def _action_count(self) -> int:
        counts = {
            (k, a): discrete_action_count(env.action_space(a), a)
            for k, env in enumerate(self.envs)
            for a in self.agent_ids[k]
        }
        values = set(counts.values())
        if len(values) != 1:
            raise RLGymAdapterError(
                f"agents have different action counts {sorted(values)}; speedflip's policy has one output size"
            )
        return values.pop()

    def _reset_env(self, k: int, probe: bool = False) -> dict[Any, Any]:
        env = self.envs[k]
        obs: dict[Any, Any] = env.reset()
        agents = self._ordered_agents(env)
        if probe:
            self.agent_ids[k] = agents
        elif agents != self.agent_ids[k]:
            raise RLGymAdapterError(
                f"arena {k}: after a reset the RLGym env has agents {agents}, before it had {self.agent_ids[k]}; "
                "speedflip needs a fixed set of agents per arena (variable team sizes are not supported)"
            )
        missing = [a for a in agents if a not in obs]
        if missing:
            raise RLGymAdapterError(f"arena {k}: the ObsBuilder returned no observation for agents {missing}")
        return obs

    def _write_obs(self, k: int, obs: dict[Any, Any], out: Array) -> None:
        C = self.num_cars
        for c, agent in enumerate(self.agent_ids[k]):
            value = obs[agent]
            if np.shape(value) != (self.obs_dim,):
                raise RLGymAdapterError(
                    f"arena {k}, agent {agent!r}: observation of shape {list(np.shape(value))}, expected "
                    f"[{self.obs_dim}] (the size every agent had at the start)"
                )
            out[k * C + c] = value

    def _start_episode(self, k: int, obs: dict[Any, Any]) -> None:
        self._write_obs(k, obs, self.obs)
        tick = self._tick(k)
        self.start_ticks[k] = tick
        self.last_ticks[k] = tick
        self.episode_returns[k] = 0.0
        self.episode_touches[k] = 0
        self.goal_seen[k] = self._goal_team(k) >= 0

    def _tick(self, k: int) -> int:
        from rlgym.rocket_league.api import GameState

        state = self.envs[k].state
        return int(state.tick_count) if isinstance(state, GameState) else 0

    def _goal_team(self, k: int) -> int:
        from rlgym.rocket_league.api import GameState

        state = self.envs[k].state
        if isinstance(state, GameState) and state.goal_scored:
            team = state.scoring_team
            return int(team) if team is not None else -1
        return -1

    def _touches(self, k: int) -> Array:
        from rlgym.rocket_league.api import GameState

        state = self.envs[k].state
        if not isinstance(state, GameState):
            return np.zeros(self.num_cars, np.int64)
        return np.array([int(state.cars[a].ball_touches) for a in self.agent_ids[k]], np.int64)

    # ------------------------------------------------------------------ VecEnv interface
    def reset(self) -> Array:
        """Reset every copy; returns observations ``[N, obs_dim]``."""
        for k in range(self.num_arenas):
            self._start_episode(k, self._reset_env(k))
        return self.obs.copy()

    def step(self, actions: Array) -> StepResult:
        """One action index per agent; every copy takes one RLGym step (its parser decides the ticks)."""
        K, C = self.num_arenas, self.num_cars
        idx = self.actions.check(actions, self.num_agents).tolist()
        rewards = np.zeros(K * C, np.float32)
        terminated = np.zeros(K * C, bool)
        truncated = np.zeros(K * C, bool)
        final_obs = np.zeros_like(self.obs)
        goal_team = np.full(K, -1, np.int64)
        episodes: list[dict[str, float]] = []
        for k, env in enumerate(self.envs):
            agents = self.agent_ids[k]
            rows = slice(k * C, (k + 1) * C)
            chosen = {agent: np.array([idx[k * C + c]], np.int64) for c, agent in enumerate(agents)}
            obs, rew, term, trunc = env.step(chosen)
            self._write_obs(k, obs, final_obs)
            rewards[rows] = [float(rew[a]) for a in agents]
            term_k = np.array([bool(term[a]) for a in agents])
            done = bool(term_k.any() or any(bool(trunc[a]) for a in agents))
            terminated[rows] = term_k
            truncated[rows] = done & ~term_k
            touches = self._touches(k)
            tick = self._tick(k)
            scored = self._goal_team(k)
            if scored >= 0 and not self.goal_seen[k]:
                goal_team[k] = scored
                self.total_goals += 1
            self.goal_seen[k] = scored >= 0
            self.episode_returns[k] += rewards[rows]
            self.episode_touches[k] += touches
            self.total_touches += int(touches.sum())
            self.total_agent_seconds += C * max(tick - int(self.last_ticks[k]), 0) / L.TICK_RATE
            self.last_ticks[k] = tick
            if done:
                seconds = max(tick - int(self.start_ticks[k]), 0) / L.TICK_RATE
                episodes.append(
                    {
                        "return": float(self.episode_returns[k].mean()),
                        "length_seconds": float(seconds),
                        "touches_per_minute": float(self.episode_touches[k].mean() * 60.0 / max(seconds, 1e-6)),
                        "goal": float(term_k.any()),
                    }
                )
                self._start_episode(k, self._reset_env(k))
            else:
                self.obs[rows] = final_obs[rows]
        self._last_reward_mean = float(rewards.mean())
        return StepResult(
            obs=self.obs.copy(),
            rewards=rewards,
            terminated=terminated,
            truncated=truncated,
            final_obs=final_obs,
            episodes=episodes,
            goal_team=goal_team,
        )

    def reward_means(self) -> dict[str, float]:
        """RLGym rewards are opaque to speedflip: one entry, ``rlgym``, the mean reward of the last step."""
        return {"rlgym": self._last_reward_mean}

    def set_reward_weights(self, weights: dict[str, float]) -> None:
        """Not available: the rewards are the RLGym env's own ``RewardFunction``."""
        raise RLGymAdapterError(
            "speedflip's reward weights and reward phases do not apply to an RLGym env: its rewards come from its "
            "RewardFunction. Remove env.reward_phases and change the rewards inside your env factory"
        )

    def set_mechanics_active(self, active: bool) -> None:
        """The mechanics lane needs speedflip's state setters; an RLGym env starts from its StateMutator."""
        if active:
            raise RLGymAdapterError(
                "the mechanics lane uses speedflip's state setters; with env.rlgym the starting states come from your "
                "StateMutator: set env.mechanics_share to 0"
            )

    def get_rng_state(self) -> dict[str, Any]:
        """Python's ``random`` and numpy's global generator state (what RLGym components draw from), JSON-able."""
        version, internal, gauss = random.getstate()
        name, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
        return {
            "format": RNG_FORMAT,
            "python_random": [version, list(internal), gauss],
            "numpy_global": [name, np.asarray(keys).tolist(), int(pos), int(has_gauss), float(cached)],
        }

    def set_rng_state(self, state: dict[str, Any]) -> None:
        """Restore a state saved by :meth:`get_rng_state`."""
        if state.get("format") != RNG_FORMAT:
            raise RLGymAdapterError(
                f"RNG state format {state.get('format')!r} does not come from an RLGym run (expected '{RNG_FORMAT}'); "
                "a checkpoint of a native-env run cannot be resumed with env.rlgym"
            )
        version, internal, gauss = state["python_random"]
        random.setstate((int(version), tuple(int(x) for x in internal), gauss))
        name, keys, pos, has_gauss, cached = state["numpy_global"]
        np.random.set_state((str(name), np.asarray(keys, np.uint32), int(pos), int(has_gauss), float(cached)))

    def describe(self) -> dict[str, Any]:
        """A summary for the start-of-run table; names the slower per-env path."""
        env = self.envs[0]
        blue = int((self.car_teams == L.BLUE).sum())
        return {
            "backend": "rlgym",
            "path": SLOW_PATH_NOTE,
            "source": self.source,
            "arenas": self.num_arenas,
            "agents": self.num_agents,
            "team_sizes": f"{blue}v{self.num_cars - blue}",
            "obs_dim": self.obs_dim,
            "actions": self.actions.coverage.summary(),
            "obs_builder": type(env.obs_builder).__name__,
            "action_parser": type(env.action_parser).__name__,
            "reward_fn": type(env.reward_fn).__name__,
            "state_mutator": type(env.state_mutator).__name__,
            "termination_cond": type(env.termination_cond).__name__,
            "truncation_cond": type(env.truncation_cond).__name__,
            "transition_engine": type(env.transition_engine).__name__,
        }

    def close(self) -> None:
        """Close every copy (its transition engine and renderer)."""
        for env in self.envs:
            env.close()


def _copy_env(env: Any) -> Any:
    from rlgym.api import RLGym
    from rlgym.rocket_league.sim import RocketSimEngine

    engine = env.transition_engine
    if not isinstance(engine, RocketSimEngine):
        raise RLGymAdapterError(
            f"cannot copy an RLGym env whose transition engine is {type(engine).__name__}; pass a factory function "
            "that builds a new env per arena instead"
        )
    return RLGym(
        state_mutator=copy.deepcopy(env.state_mutator),
        obs_builder=copy.deepcopy(env.obs_builder),
        action_parser=copy.deepcopy(env.action_parser),
        reward_fn=copy.deepcopy(env.reward_fn),
        transition_engine=RocketSimEngine(rlbot_delay=bool(engine.config["rlbot_delay"])),
        termination_cond=copy.deepcopy(env.termination_cond),
        truncation_cond=copy.deepcopy(env.truncation_cond),
        shared_info_provider=copy.deepcopy(env.shared_info_provider),
    )


# ---------------------------------------------------------------------- from a run config
def probe_dims(spec: str) -> tuple[int, int]:
    """``(obs_dim, num_actions)`` of the env a factory spec builds (one copy, built and closed).

    What a run directory's compatibility check needs before the trainer exists: with ``env.rlgym``
    set these come from the user's env, not from speedflip's observation settings.
    """
    vec = RLGymVecEnv.from_factory(spec, 1, seed_global_rngs=False)
    try:
        return vec.obs_dim, vec.num_actions
    finally:
        vec.close()


def make_rlgym_vec_env(cfg: Config, seed: int) -> RLGymVecEnv:
    """The adapter for a run config with ``env.rlgym`` set; rejects settings it cannot honour."""
    env_cfg = cfg.env
    spec = env_cfg.rlgym
    if spec is None:
        raise RLGymAdapterError("env.rlgym is not set")
    if cfg.run.collector in ("multiprocess", "pipelined"):
        raise RLGymAdapterError(
            f"env.rlgym runs in this process; run.collector '{cfg.run.collector}' is not supported with it (use "
            "'auto' or 'inprocess')"
        )
    if cfg.curriculum.enabled:
        raise RLGymAdapterError(
            "curriculum stages change team sizes, which an RLGym factory decides itself; disable curriculum.enabled "
            "with env.rlgym"
        )
    if env_cfg.reward_phases:
        raise RLGymAdapterError(
            "env.reward_phases do not apply with env.rlgym (the rewards are your RLGym RewardFunction); remove them"
        )
    settings = env_cfg.model_dump()  # newer keys read by name: other parts of the config grow concurrently
    if settings.get("mechanics_share", 0) > 0:
        raise RLGymAdapterError(
            "env.mechanics_share does not apply with env.rlgym (starting states come from your StateMutator); set it "
            "to 0"
        )
    if settings.get("action_form", "table") != "table" or settings.get("action_masking", False):
        raise RLGymAdapterError(
            "with env.rlgym the actions are your ActionParser's discrete indices: use env.action_form 'table' and "
            "env.action_masking false"
        )
    vec = RLGymVecEnv.from_factory(spec, env_cfg.num_arenas, seed=seed)
    blue = int((vec.car_teams == L.BLUE).sum())
    orange = vec.num_cars - blue
    if (blue, orange) != (env_cfg.blue_size, env_cfg.orange_size):
        vec.close()
        raise RLGymAdapterError(
            f"the RLGym env from '{spec}' has {blue} blue and {orange} orange cars, but env.blue_size is "
            f"{env_cfg.blue_size} and env.orange_size is {env_cfg.orange_size}; set them to {blue} and {orange} "
            "(the trainer sizes its batches and opponent seats from them)"
        )
    return vec


__all__ = [
    "SLOW_PATH_NOTE",
    "RLGymActionTable",
    "RLGymAdapterError",
    "RLGymCoverage",
    "RLGymFactory",
    "RLGymVecEnv",
    "discrete_action_count",
    "load_factory",
    "make_rlgym_vec_env",
    "probe_dims",
]
