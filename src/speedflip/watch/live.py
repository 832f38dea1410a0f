"""``--render``: a live view of one arena in RLViser, through ``rlviser-py`` (RLGym's renderer protocol).

RLViser is a separate program the user starts (it listens on UDP port 45243; ``rlviser-py`` sends it
game states from port 34254, and launches ``./rlviser`` itself when that file exists in the working
directory). Without it, ``--render`` says so once and everything else carries on.

Training runs far faster than real time, so the view cannot show every step of an arena as it
happens. :class:`LiveView` instead takes *segments*: it copies a few seconds of consecutive states of
one arena (a cheap copy of three small arrays per step, nothing else is done on the training thread),
plays them to RLViser at real-time speed from a background thread, then takes the next segment of
whatever the arena is doing by then. The other arenas are never touched or slowed.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from speedflip._types import Array
from speedflip.env import layout as L
from speedflip.env.arenas import GameArrays

RLVISER_PORT = 45243  # RLViser's own UDP socket (rlviser-py's is 34254)
DISABLED_MESSAGE = "RLViser not running: --render disabled, training continues"

RenderFn = Callable[..., Any]


@dataclass(frozen=True)
class RLViserStatus:
    """Whether states can be streamed, and a sentence that says why (not)."""

    available: bool
    reason: str


def _port_in_use(port: int) -> bool:
    """True when another process holds UDP ``port`` on this machine (RLViser binds 0.0.0.0:45243)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.bind(("0.0.0.0", port))
    except OSError as err:
        return err.errno in (errno.EADDRINUSE, errno.EACCES)
    finally:
        probe.close()
    return False


def rlviser_status(port: int = RLVISER_PORT, workdir: Path | None = None) -> RLViserStatus:
    """Is ``rlviser-py`` installed and RLViser running (or launchable from ``./rlviser``)?"""
    try:
        import rlviser_py  # noqa: F401
    except ImportError:
        return RLViserStatus(False, "rlviser-py is not installed (pip install 'speedflip[render]')")
    if _port_in_use(port):
        return RLViserStatus(True, f"RLViser is listening on UDP port {port}")
    folder = workdir or Path.cwd()
    for name in ("rlviser", "rlviser.exe"):
        binary = folder / name
        if binary.is_file() and os.access(binary, os.X_OK):
            return RLViserStatus(True, f"rlviser-py will launch {binary}")
    return RLViserStatus(
        False,
        f"nothing listens on UDP port {port} and there is no ./rlviser to launch; start RLViser first "
        "(or put its binary in the working directory)",
    )


def _rot_rows(forward: Array, right: Array, up: Array) -> tuple[float, ...]:
    return tuple(float(v) for v in (*forward, *right, *up))


def quat_axes(quat: Array) -> tuple[Array, Array, Array]:
    """RocketSim quaternion ``(w, x, y, z)`` -> forward, right, up."""
    w, x, y, z = (float(v) for v in quat / max(float(np.linalg.norm(quat)), 1e-9))
    forward = np.array([1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)])
    right = np.array([2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)])
    up = np.array([2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)])
    return forward, right, up


@dataclass
class Frame:
    """One arena's state for the viewer: ball ``[25]``, cars ``[C, 36]`` (perspective 0), pads ``[34]``."""

    ball: Array
    cars: Array
    pads: Array


def frame_of(state: GameArrays, arena: int) -> Frame:
    """A copy of arena ``arena``'s rows (the only work done on the caller's thread)."""
    return Frame(state.ball[arena, 0].copy(), state.cars[arena, :, 0].copy(), state.pads[arena, 0].copy())


def render_args(frame: Frame, car_teams: Sequence[int], tick: int, tick_rate: float) -> dict[str, Any]:
    """Keyword arguments of ``rlviser_py.render`` for one frame (RocketSim state objects)."""
    import RocketSim as rsim

    ball = rsim.BallState()
    ball.pos = rsim.Vec(*(float(v) for v in frame.ball[L.BALL_POS]))
    ball.vel = rsim.Vec(*(float(v) for v in frame.ball[L.BALL_VEL]))
    ball.ang_vel = rsim.Vec(*(float(v) for v in frame.ball[L.BALL_ANG_VEL]))
    ball.rot_mat = rsim.RotMat(*_rot_rows(*quat_axes(frame.ball[L.BALL_QUAT])))
    cars = []
    for c, row in enumerate(frame.cars):
        car = rsim.CarState()
        car.pos = rsim.Vec(*(float(v) for v in row[L.CAR_POS]))
        car.vel = rsim.Vec(*(float(v) for v in row[L.CAR_VEL]))
        car.ang_vel = rsim.Vec(*(float(v) for v in row[L.CAR_ANG_VEL]))
        car.rot_mat = rsim.RotMat(*_rot_rows(row[L.CAR_FORWARD], row[L.CAR_RIGHT], row[L.CAR_UP]))
        car.boost = float(row[L.CAR_BOOST])
        car.is_on_ground = bool(row[L.CAR_ON_GROUND] > 0.5)
        car.demo_respawn_timer = 1.0 if row[L.CAR_IS_DEMOED] > 0.5 else 0.0
        cars.append((int(row[L.CAR_ID]) or c + 1, int(car_teams[c]), rsim.CarConfig(0), car))
    return {
        "tick_count": tick,
        "tick_rate": tick_rate,
        "game_mode": rsim.GameMode.SOCCAR,
        "boost_pad_states": [bool(p > 0.5) for p in frame.pads],
        "ball": ball,
        "cars": cars,
    }


class LiveView:
    """Streams segments of one arena to RLViser at real-time speed from a background thread.

    Call :meth:`push` with the env's state after every step (it only copies arena ``arena`` while a
    segment is being filled) and :meth:`close` at the end. Use :meth:`open` to get one: it returns
    None, after saying why, when RLViser is not there.
    """

    def __init__(
        self,
        tick_skip: int,
        car_teams: Sequence[int],
        pad_positions: Sequence[Sequence[float]],
        arena: int = 0,
        segment_seconds: float = 10.0,
        render: RenderFn | None = None,
        game_speed: Callable[[], float] | None = None,
        game_paused: Callable[[], bool] | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.arena = arena
        self.car_teams = [int(t) for t in car_teams]
        self.frame_seconds = tick_skip / L.TICK_RATE
        self.tick_skip = tick_skip
        self.capacity = max(1, round(segment_seconds / self.frame_seconds))
        self.pad_positions = [tuple(float(v) for v in p) for p in pad_positions]
        self._render = render
        self._game_speed = game_speed or (lambda: 1.0)
        self._game_paused = game_paused or (lambda: False)
        self._on_error = on_error
        self._frames: deque[Frame] = deque()
        self._accepting = True
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.frames_sent = 0
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, name="speedflip-rlviser", daemon=True)
        self._thread.start()

    @classmethod
    def open(
        cls,
        tick_skip: int,
        car_teams: Sequence[int],
        pad_positions: Sequence[Sequence[float]],
        arena: int = 0,
        say: Callable[[str], None] = print,
        segment_seconds: float = 10.0,
    ) -> LiveView | None:
        """A live view when RLViser is there; otherwise None after ``say``-ing that ``--render`` is off."""
        status = rlviser_status()
        if not status.available:
            say(f"{DISABLED_MESSAGE} ({status.reason})")
            return None
        import rlviser_py

        try:
            rlviser_py.set_boost_pad_locations([(p[0], p[1], p[2]) for p in pad_positions])
        except (OSError, RuntimeError, ValueError, TypeError) as err:
            say(f"{DISABLED_MESSAGE} (rlviser-py refused the boost pads: {err})")
            return None
        say(f"--render: streaming arena {arena} to RLViser at real-time speed ({status.reason})")
        return cls(
            tick_skip, car_teams, pad_positions, arena=arena, segment_seconds=segment_seconds,
            render=rlviser_py.render, game_speed=rlviser_py.get_game_speed,
            game_paused=rlviser_py.get_game_paused, on_error=say,
        )  # fmt: skip

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and self.error is None

    def push(self, state: GameArrays) -> None:
        """Offer the state after a step; copied only while a segment is being filled."""
        if not self._accepting or self.error is not None:
            return
        frame = frame_of(state, self.arena)
        with self._lock:
            self._frames.append(frame)
            if len(self._frames) >= self.capacity:
                self._accepting = False
        self._wake.set()

    def _run(self) -> None:
        next_time = time.perf_counter()
        tick = 0
        while not self._stop.is_set():
            with self._lock:
                frame = self._frames.popleft() if self._frames else None
                if frame is None:
                    self._accepting = True  # the segment is played: take the next one
            if frame is None:
                self._wake.wait(0.1)
                self._wake.clear()
                next_time = time.perf_counter()
                continue
            while self._game_paused() and not self._stop.is_set():
                time.sleep(0.05)
                next_time = time.perf_counter()
            tick += self.tick_skip
            try:
                if self._render is not None:
                    self._render(**render_args(frame, self.car_teams, tick, float(L.TICK_RATE)))
            except (OSError, RuntimeError, ValueError, TypeError) as err:
                self.error = f"{DISABLED_MESSAGE} (sending to RLViser failed: {err})"
                if self._on_error is not None:
                    self._on_error(self.error)
                return
            self.frames_sent += 1
            speed = max(float(self._game_speed()), 1e-3)
            next_time += self.frame_seconds / speed
            delay = next_time - time.perf_counter()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_time = time.perf_counter()  # fell behind (slow machine): do not try to catch up

    def close(self, timeout: float = 2.0) -> None:
        """Stop the background thread (frames not yet shown are dropped)."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)


def replay_frames(ball: Array, cars: Array, boost: Array, flags: Array, pads: Array) -> list[Frame]:
    """Frames from a replay's arrays (positions and orientations; velocities are not recorded)."""
    frames = []
    for t in range(ball.shape[0]):
        b = np.zeros(L.BALL_WIDTH, np.float32)
        b[L.BALL_POS], b[L.BALL_QUAT] = ball[t, :3], ball[t, 3:7]
        rows = np.zeros((cars.shape[1], L.CAR_WIDTH), np.float32)
        for c in range(cars.shape[1]):
            forward, right, up = quat_axes(cars[t, c, 3:7])
            rows[c, L.CAR_ID] = c + 1
            rows[c, L.CAR_POS], rows[c, L.CAR_QUAT] = cars[t, c, :3], cars[t, c, 3:7]
            rows[c, L.CAR_FORWARD], rows[c, L.CAR_RIGHT], rows[c, L.CAR_UP] = forward, right, up
            rows[c, L.CAR_BOOST] = boost[t, c]
            rows[c, L.CAR_IS_DEMOED] = float(flags[t, c] & 1)
            rows[c, L.CAR_ON_GROUND] = float((flags[t, c] >> 1) & 1)
        frames.append(Frame(b, rows, pads[t].astype(np.float32)))
    return frames


def stream_frames(
    frames: Sequence[Frame],
    car_teams: Sequence[int],
    pad_positions: Sequence[Sequence[float]],
    tick_skip: int,
    say: Callable[[str], None] = print,
) -> int:
    """Play ``frames`` to RLViser at real-time speed (blocking); returns frames sent (0 when RLViser is absent)."""
    view = LiveView.open(tick_skip, car_teams, pad_positions, say=say, segment_seconds=len(frames) * 2 + 1.0)
    if view is None:
        return 0
    try:
        for frame in frames:
            with view._lock:
                view._frames.append(frame)
        view._accepting = False
        view._wake.set()
        while view.running and view.frames_sent < len(frames):
            time.sleep(0.05)
    finally:
        view.close()
    return view.frames_sent
