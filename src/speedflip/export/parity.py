"""Parity between training and an exported bot: same observations, same actions, step for step.

:func:`record_match` plays a RocketSim match with a checkpoint's policy (deterministic, every car)
and keeps, per step, the state arrays, the observations speedflip built and the actions it chose.
:func:`replay_through_bot` feeds the recorded states to the exported bot's own code: each state is
wrapped as an ``rlgym_compat.GameState`` look-alike (:class:`RecordedCompatState`, the inverted view
derived the way rlgym-compat derives it), converted by the bot's ``compat_to_arrays`` and observed
and decided by one ``SpeedflipAgent`` per car -- the path a packet takes after rlgym-compat has read it.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from speedflip._types import Array
from speedflip.env import layout as L
from speedflip.env.arenas import GameArrays

INV_VEC = np.array([-1, -1, 1], np.float32)
INV_MTX = np.array([[-1, -1, -1], [-1, -1, -1], [1, 1, 1]], np.float32)


# ---------------------------------------------------------------------- compat look-alikes
class RecordedPhysics:
    """A ``PhysicsObject`` look-alike from one gym-state row (ball or car)."""

    def __init__(self, pos: Array, vel: Array, ang_vel: Array, rot: Array, quat: Array) -> None:
        self.position = pos
        self.linear_velocity = vel
        self.angular_velocity = ang_vel
        self._rot = rot
        self._quat = quat

    @property
    def rotation_mtx(self) -> Array:
        return self._rot

    @property
    def quaternion(self) -> Array:
        return self._quat

    def inverted(self) -> RecordedPhysics:
        """rlgym-compat's rule: x and y of every vector and of every rotation column negated."""
        return RecordedPhysics(
            self.position * INV_VEC, self.linear_velocity * INV_VEC, self.angular_velocity * INV_VEC,
            self._rot * INV_MTX, np.zeros(4, np.float32),
        )  # fmt: skip


class RecordedCar:
    """A ``Car`` look-alike."""

    def __init__(self, row: Array) -> None:
        self.team_num = int(row[L.CAR_TEAM])
        self.boost_amount = float(row[L.CAR_BOOST])
        self._on_ground = bool(row[L.CAR_ON_GROUND] > 0.5)
        self._demoed = bool(row[L.CAR_IS_DEMOED] > 0.5)
        rot = np.stack([row[L.CAR_FORWARD], row[L.CAR_RIGHT], row[L.CAR_UP]], axis=1).astype(np.float32)
        self._physics = RecordedPhysics(row[L.CAR_POS], row[L.CAR_VEL], row[L.CAR_ANG_VEL], rot, row[L.CAR_QUAT])

    @property
    def on_ground(self) -> bool:
        return self._on_ground

    @property
    def is_demoed(self) -> bool:
        return self._demoed

    @property
    def physics(self) -> RecordedPhysics:
        return self._physics

    @property
    def inverted_physics(self) -> RecordedPhysics:
        return self._physics.inverted()


class RecordedCompatState:
    """A ``GameState`` look-alike of arena ``k`` of recorded arrays (world view only, like a packet)."""

    def __init__(self, state: GameArrays, k: int) -> None:
        self.cars = {c: RecordedCar(state.cars[k, c, 0]) for c in range(state.cars.shape[1])}
        b = state.ball[k, 0]
        self.ball = RecordedPhysics(b[L.BALL_POS], b[L.BALL_VEL], b[L.BALL_ANG_VEL], np.eye(3, dtype=np.float32),
                                    b[L.BALL_QUAT])  # fmt: skip
        self.boost_pad_timers = np.where(state.pads[k, 0] > 0.5, 0.0, 1.0).astype(np.float32)

    @property
    def inverted_ball(self) -> RecordedPhysics:
        return self.ball.inverted()

    @property
    def inverted_boost_pad_timers(self) -> Array:
        return np.ascontiguousarray(self.boost_pad_timers[::-1])


# ---------------------------------------------------------------------- recording
@dataclass
class Recording:
    """A match as training saw it: per step the states, observations and chosen actions."""

    states: list[GameArrays]
    obs: Array  # [T, N, D]
    actions: Array  # [T, N]
    reset: Array  # [T, K] True where the arena starts an episode at this step's state
    num_cars: int
    car_teams: Array
    meta: dict[str, Any] = field(default_factory=dict)


def record_match(
    checkpoint: Path | list[Path],
    obs_options: dict[str, object],
    team_size: int,
    steps: int = 150,
    arenas: int = 2,
    episode_seconds: float = 4.0,
    seed: int = 7,
) -> Recording:
    """Play ``steps`` decisions in ``arenas`` kickoff arenas, every car driven by the checkpoint (argmax); a list of
    checkpoints plays as one :class:`~speedflip.selfplay.policies.EnsemblePolicy` (argmax of the mean probabilities).

    Episodes are cut every ``episode_seconds`` (and at goals) so resets are part of the recording.
    """
    from speedflip.env.vec_env import RocketLeagueVecEnv
    from speedflip.selfplay.match import match_env_config
    from speedflip.selfplay.policies import EnsemblePolicy, NeuralPolicy

    cfg = match_env_config(arenas, team_size, episode_seconds, obs_options=obs_options)
    cfg = cfg.model_copy(update={"timeout_seconds": episode_seconds})
    env = RocketLeagueVecEnv(cfg, seed=seed)
    try:
        # refused unless the checkpoint's own table is the env's (obs_options carries its action_table)
        paths = checkpoint if isinstance(checkpoint, list) else [checkpoint]
        networks = [NeuralPolicy(p, env.obs_dim, deterministic=True, seed=seed, table=env.actions.table) for p in paths]
        policy: NeuralPolicy | EnsemblePolicy = networks[0]
        if len(networks) > 1:
            policy = EnsemblePolicy(networks, "ensemble", deterministic=True, seed=seed)
        obs = env.reset()
        states, all_obs, all_actions, resets = [], [], [], []
        reset = np.ones(arenas, bool)
        for _ in range(steps):
            actions = policy.act(obs, env.state, env.car_teams)
            states.append(env.state.copy())
            all_obs.append(obs.copy())
            all_actions.append(np.asarray(actions, np.int64))
            resets.append(reset.copy())
            result = env.step(actions)
            reset = (result.terminated | result.truncated).reshape(arenas, env.num_cars)[:, 0]
            obs = result.obs
    finally:
        env.close()
    return Recording(
        states=states, obs=np.stack(all_obs), actions=np.stack(all_actions), reset=np.stack(resets),
        num_cars=env.num_cars, car_teams=env.car_teams.copy(),
        meta={"arenas": arenas, "team_size": team_size, "steps": steps, "episode_seconds": episode_seconds},
    )  # fmt: skip


# ---------------------------------------------------------------------- the bot's side
def load_bundle(bot_dir: Path, package: str = "speedflip_runtime") -> ModuleType:
    """Import an exported bot's runtime package under a unique name (several bots can load side by side)."""
    folder = Path(bot_dir) / package
    name = f"_speedflip_bundle_{abs(hash(str(folder.resolve())))}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import the bot runtime from {folder}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    for sub in ("agent", "convert"):
        setattr(module, sub, importlib.import_module(f"{name}.{sub}"))
    return module


@dataclass
class ParityResult:
    """How the exported bot compared with training over a recording."""

    steps: int
    agents: int
    decisions: int
    obs_mismatches: int  # decisions whose observation differs in any float
    max_obs_diff: float
    action_mismatches: int
    first_mismatch: str | None
    backend: str

    @property
    def ok(self) -> bool:
        return self.obs_mismatches == 0 and self.action_mismatches == 0

    def summary(self) -> str:
        verdict = "identical" if self.ok else "DIFFERENT"
        text = (
            f"{verdict}: {self.decisions} decisions ({self.steps} steps x {self.agents} cars, {self.backend} "
            f"backend): {self.obs_mismatches} observation and {self.action_mismatches} action mismatches, "
            f"max observation difference {self.max_obs_diff:.3g}"
        )
        return text + (f"; first: {self.first_mismatch}" if self.first_mismatch else "")


def replay_through_bot(bot_dir: Path, recording: Recording, backend: str = "auto") -> ParityResult:
    """Run the recording through the exported bot's compat->arrays->observation->action path."""
    bundle = load_bundle(bot_dir)
    T, N = recording.actions.shape
    C = recording.num_cars
    K = N // C
    agents = [bundle.agent.SpeedflipAgent(Path(bot_dir), backend=backend) for _ in range(N)]
    obs_mismatches = action_mismatches = 0
    max_diff = 0.0
    first: str | None = None
    for t in range(T):
        state = recording.states[t]
        for k in range(K):
            arrays, order, blue, orange = bundle.convert.compat_to_arrays(RecordedCompatState(state, k))
            for c in range(C):
                agent = agents[k * C + c]
                row = order.index(c)
                if recording.reset[t, k]:
                    obs = agent.observe_reset(arrays, row, blue, orange)
                else:
                    obs = agent.observe_step(arrays, row, blue, orange)
                action = agent.act(obs)
                want_obs = recording.obs[t, k * C + c]
                diff = float(np.max(np.abs(obs - want_obs))) if obs.shape == want_obs.shape else math.inf
                max_diff = max(max_diff, diff)
                wrong_obs = obs.shape != want_obs.shape or not np.array_equal(obs, want_obs)
                wrong_action = action != int(recording.actions[t, k * C + c])
                obs_mismatches += wrong_obs
                action_mismatches += wrong_action
                if (wrong_obs or wrong_action) and first is None:
                    first = (
                        f"step {t}, arena {k}, car {c}: obs diff {diff:.3g}, action {action} "
                        f"vs training {int(recording.actions[t, k * C + c])}"
                    )
    return ParityResult(T, N, T * N, obs_mismatches, max_diff, action_mismatches, first, agents[0].backend)
