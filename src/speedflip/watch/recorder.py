"""Record a match played in RocketSim as compact arrays (a :class:`Replay`), save and load it.

A replay holds one frame per decision step (every ``tick_skip`` physics ticks) of one arena, in
world coordinates (perspective 0: blue defends -y). Frames where play restarts (the first frame
and the kickoff after a goal) are flagged in ``cut`` so a viewer never interpolates across them;
the frame of a goal itself is kept (the env resets the arena within the same step, so the state at
the goal is captured just before that reset).
"""

from __future__ import annotations

import json
import math
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from speedflip import __version__
from speedflip._types import Array
from speedflip.env import layout as L
from speedflip.env.arenas import GameArrays
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.selfplay.match import Player, match_env_config, reset_ended, step_inputs
from speedflip.watch.errors import ReplayError

FLAG_DEMOED = 1
FLAG_ON_GROUND = 2
FLAG_BOOSTING = 4
FORMAT = "speedflip-replay-v1"


@dataclass
class Replay:
    """One arena's match, frame by frame (``T`` frames, ``C`` cars: blue cars first).

    - ``ball``: ``[T, 7]`` position (uu) and orientation quaternion ``(w, x, y, z)``
    - ``cars``: ``[T, C, 7]`` the same per car
    - ``boost``: ``[T, C]`` boost amount 0..100
    - ``flags``: ``[T, C]`` bit 0 demolished, bit 1 on the ground, bit 2 boosting
    - ``pads``: ``[T, 34]`` 1 where a boost pad is available
    - ``scores``: ``[T, 2]`` goals of blue and orange so far
    - ``cut``: ``[T]`` True where play restarts (no interpolation from the previous frame)
    - ``clock``: ``[T]`` game seconds since the start (a goal frame and its kickoff share a time)
    - ``meta``: players, team sizes, tick skip, frame time, pad positions, field size, version
    """

    ball: Array
    cars: Array
    boost: Array
    flags: Array
    pads: Array
    scores: Array
    cut: Array
    clock: Array
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def num_frames(self) -> int:
        return int(self.ball.shape[0])

    @property
    def seconds(self) -> float:
        """Simulated time covered by the replay."""
        return float(self.clock[-1]) if self.num_frames else 0.0

    def save(self, path: str | Path) -> Path:
        """Write a compressed ``.npz`` (arrays + ``meta`` as JSON text); returns the path."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(
            out,
            ball=self.ball.astype(np.float32),
            cars=self.cars.astype(np.float32),
            boost=self.boost.astype(np.float32),
            flags=self.flags.astype(np.uint8),
            pads=self.pads.astype(np.uint8),
            scores=self.scores.astype(np.int32),
            cut=self.cut.astype(np.uint8),
            clock=self.clock.astype(np.float32),
            meta=np.array(json.dumps(self.meta)),
        )
        return out

    @classmethod
    def load(cls, path: str | Path) -> Replay:
        """Read a replay written by :meth:`save`; a clear :class:`ReplayError` for anything else."""
        src = Path(path)
        if not src.is_file():
            raise ReplayError(f"replay file '{src}' does not exist")
        try:
            with np.load(src, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
            raise ReplayError(f"'{src}' is not a speedflip replay (.npz): {err}") from None
        needed = ("ball", "cars", "boost", "flags", "pads", "scores", "cut", "clock", "meta")
        missing = [k for k in needed if k not in arrays]
        if missing:
            raise ReplayError(f"'{src}' is not a speedflip replay: it lacks {', '.join(missing)}")
        try:
            meta = json.loads(str(arrays["meta"]))
        except json.JSONDecodeError as err:
            raise ReplayError(f"'{src}': the replay's metadata is corrupt ({err})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ReplayError(f"'{src}' has an unknown replay format (expected {FORMAT})")
        replay = cls(
            ball=arrays["ball"],
            cars=arrays["cars"],
            boost=arrays["boost"],
            flags=arrays["flags"],
            pads=arrays["pads"],
            scores=arrays["scores"],
            cut=arrays["cut"].astype(bool),
            clock=arrays["clock"],
            meta=meta,
        )
        replay.check()
        return replay

    def check(self) -> None:
        """Raise :class:`ReplayError` when the arrays do not fit together."""
        T = self.num_frames
        C = int(self.cars.shape[1]) if self.cars.ndim == 3 else -1
        shapes = {
            "ball": (self.ball.shape, (T, 7)),
            "cars": (self.cars.shape, (T, C, 7)),
            "boost": (self.boost.shape, (T, C)),
            "flags": (self.flags.shape, (T, C)),
            "pads": (self.pads.shape, (T, L.NUM_BOOST_PADS)),
            "scores": (self.scores.shape, (T, 2)),
            "cut": (self.cut.shape, (T,)),
            "clock": (self.clock.shape, (T,)),
        }
        bad = [f"{k} {list(got)} (expected {list(want)})" for k, (got, want) in shapes.items() if tuple(got) != want]
        if T < 1 or C < 1 or bad:
            raise ReplayError("inconsistent replay arrays: " + (", ".join(bad) or "no frames or no cars"))


class _FrameBuffer:
    """Frames collected during a match (lists of per-frame arrays, stacked at the end)."""

    def __init__(self) -> None:
        self.ball: list[Array] = []
        self.cars: list[Array] = []
        self.boost: list[Array] = []
        self.flags: list[Array] = []
        self.pads: list[Array] = []
        self.scores: list[Array] = []
        self.cut: list[bool] = []
        self.clock: list[float] = []

    def add(self, state: GameArrays, k: int, boosting: Array, cut: bool, scores: Array, clock: float) -> None:
        cars = state.cars[k, :, 0]
        ball = state.ball[k, 0]
        self.ball.append(np.concatenate([ball[L.BALL_POS], ball[L.BALL_QUAT]]).astype(np.float32))
        self.cars.append(np.concatenate([cars[:, L.CAR_POS], cars[:, L.CAR_QUAT]], axis=1).astype(np.float32))
        self.boost.append(cars[:, L.CAR_BOOST].astype(np.float32))
        flags = (
            (cars[:, L.CAR_IS_DEMOED] > 0.5) * FLAG_DEMOED
            + (cars[:, L.CAR_ON_GROUND] > 0.5) * FLAG_ON_GROUND
            + (boosting > 0.5) * FLAG_BOOSTING
        )
        self.flags.append(flags.astype(np.uint8))
        self.pads.append((state.pads[k, 0] > 0.5).astype(np.uint8))
        self.scores.append(scores.astype(np.int32).copy())
        self.cut.append(cut)
        self.clock.append(clock)

    def build(self, meta: dict[str, Any]) -> Replay:
        return Replay(
            ball=np.stack(self.ball),
            cars=np.stack(self.cars),
            boost=np.stack(self.boost),
            flags=np.stack(self.flags),
            pads=np.stack(self.pads),
            scores=np.stack(self.scores),
            cut=np.array(self.cut, bool),
            clock=np.array(self.clock, np.float32),
            meta=meta,
        )


class RecordingEnv(RocketLeagueVecEnv):
    """A match env keeping a copy of the state of arenas that are about to be reset (goal frames)."""

    pre_reset: GameArrays | None = None

    def _reset_arenas(self, ids: Array) -> None:
        self.pre_reset = self.arenas.state.copy()
        super()._reset_arenas(ids)


def pad_positions(env: RocketLeagueVecEnv) -> list[list[float]]:
    """Boost pad positions in the order of the state arrays (RocketSim's order)."""
    pads = env.arenas.arenas[0].get_boost_pads()
    return [[round(p.get_pos().x, 1), round(p.get_pos().y, 1), round(p.get_pos().z, 1)] for p in pads]


def pad_is_big(env: RocketLeagueVecEnv) -> list[bool]:
    return [bool(p.is_big) for p in env.arenas.arenas[0].get_boost_pads()]


def replay_meta(
    env: RocketLeagueVecEnv, blue_name: str, orange_name: str, seconds: float, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The metadata a viewer needs besides the arrays."""
    cfg = env.cfg
    return {
        "format": FORMAT,
        "speedflip_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "blue_name": blue_name,
        "orange_name": orange_name,
        "blue_size": cfg.blue_size,
        "orange_size": cfg.orange_size,
        "car_teams": [int(t) for t in env.car_teams],
        "tick_skip": cfg.tick_skip,
        "tick_rate": L.TICK_RATE,
        "frame_seconds": cfg.tick_skip / L.TICK_RATE,
        "game_seconds": seconds,
        "pad_positions": pad_positions(env),
        "pad_big": pad_is_big(env),
        "field": {
            "side_wall_x": L.SIDE_WALL_X,
            "back_wall_y": L.BACK_WALL_Y,
            "ceiling_z": L.CEILING_Z,
            "corner_sum": L.CORNER_SUM,
            "goal_half_width": 892.755,
            "goal_height": L.GOAL_HEIGHT,
            "goal_depth": 880.0,
            "ball_radius": L.BALL_RADIUS,
            "car_size": [118.0, 84.2, 36.2],
            "car_offset": [13.88, 0.0, 20.75],
        },
        **(extra or {}),
    }


def record_game(
    env: RocketLeagueVecEnv,
    blue: Player,
    orange: Player,
    seconds: float,
    extra_meta: dict[str, Any] | None = None,
) -> Replay:
    """Play ``seconds`` of simulated time in arena 0 of ``env`` (``blue`` drives blue, ``orange`` orange).

    ``blue`` and ``orange`` are match players (:data:`speedflip.selfplay.match.Player`). ``env`` must be
    a :class:`RecordingEnv` built from :func:`speedflip.selfplay.match.match_env_config` with one arena
    (use :func:`make_recording_env`). A goal ends the play and the next frame is a new kickoff.
    """
    if not isinstance(env, RecordingEnv):
        raise ReplayError("record_game needs an env from make_recording_env()")
    if env.num_arenas != 1:
        raise ReplayError(f"record_game records one arena, the env has {env.num_arenas}")
    if not seconds > 0:
        raise ReplayError(f"--seconds must be positive, got {seconds}")
    C = env.num_cars
    blue_rows = env.car_teams == L.BLUE
    buffer = _FrameBuffer()
    obs = env.reset()
    scores = np.zeros(2, np.int64)
    buffer.add(env.state, 0, np.zeros(C), cut=True, scores=scores, clock=0.0)
    steps = math.ceil(seconds * L.TICK_RATE / env.cfg.tick_skip)
    frame_seconds = env.cfg.tick_skip / L.TICK_RATE
    for step in range(steps):
        clock = (step + 1) * frame_seconds
        # each player acts in its own lookup table (decoded by step_inputs, as in play_match)
        actions, custom = step_inputs(env, obs, ((blue, blue_rows), (orange, ~blue_rows)))
        env.pre_reset = None
        result = env.step(actions, custom)
        reset_ended(result.terminated | result.truncated, blue, orange)
        boosting = env.prev_controls[0, :, 6]
        goal = int(result.goal_team[0]) if result.goal_team is not None else -1
        if goal >= 0:
            scores[goal] += 1
        if env.pre_reset is not None:  # the arena was reset in this step: keep the frame before the reset
            buffer.add(env.pre_reset, 0, boosting, cut=False, scores=scores, clock=clock)
            buffer.add(env.state, 0, np.zeros(C), cut=True, scores=scores, clock=clock)
        else:
            buffer.add(env.state, 0, boosting, cut=False, scores=scores, clock=clock)
        obs = result.obs
    meta = replay_meta(env, str(blue.name), str(orange.name), seconds, extra_meta)
    meta["goals"] = [int(s) for s in scores]
    return buffer.build(meta)


def make_recording_env(
    team_size: int, seconds: float, obs_options: dict[str, object] | None = None, seed: int = 0
) -> RecordingEnv:
    """A one-arena match env that keeps goal frames (see :func:`record_game`).

    ``obs_options``: the settings of the neural players (builder, padding, frame stack, tick skip and
    their ``action_table``), as :func:`speedflip.selfplay.match.match_env_config` takes them.
    """
    cfg = match_env_config(1, team_size, seconds, obs_options=obs_options)
    return RecordingEnv(cfg, seed=seed)
