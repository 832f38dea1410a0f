"""State setters: how an episode starts. Each one sets one arena; the env picks one per reset."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import RocketSim as rsim

from speedflip._types import Array
from speedflip.env import layout as L

StateSetter = Callable[[rsim.Arena, list[rsim.Car], np.random.Generator], None]


KICKOFF_SPOTS = np.array(rsim.RLConst.CAR_SPAWN_LOCATIONS_SOCCAR, np.float64)  # blue side: (x, y, yaw)


def kickoff(arena: rsim.Arena, cars: list[rsim.Car], rng: np.random.Generator) -> None:
    """A standard kickoff: each team on distinct spawn spots of the 5 standard ones, mirrored.

    ``reset_kickoff`` resets the ball, pads and cars; the seats are then assigned here from ``rng``
    (RocketSim pairs cars to spots in the order of its internal car set, which is not reproducible
    across processes), so that orange car ``i`` always mirrors blue car ``i``.
    """
    arena.reset_kickoff(seed=int(rng.integers(0, 2**31 - 1)))
    blue = [c for c in cars if c.team == rsim.Team.BLUE]
    orange = [c for c in cars if c.team == rsim.Team.ORANGE]
    spots = rng.permutation(len(KICKOFF_SPOTS))
    for side, team_cars in ((1.0, blue), (-1.0, orange)):
        for seat, car in enumerate(team_cars):
            x, y, yaw = KICKOFF_SPOTS[spots[seat % len(spots)]]
            state = car.get_state()
            state.pos = rsim.Vec(float(side * x), float(side * y), L.CAR_REST_Z)
            state.rot_mat = rsim.Angle(float(yaw if side > 0 else yaw + np.pi), 0.0, 0.0).as_rot_mat()
            state.vel = rsim.Vec(0.0, 0.0, 0.0)
            state.ang_vel = rsim.Vec(0.0, 0.0, 0.0)
            car.set_state(state)


def random_state(
    arena: rsim.Arena,
    cars: list[rsim.Car],
    rng: np.random.Generator,
    *,
    ball_max_speed: float = 2000.0,
    car_max_speed: float = 1500.0,
    air_fraction: float = 0.2,
) -> None:
    """Random ball and car positions and velocities; about ``air_fraction`` of cars start in the air."""
    margin = 300.0
    ball = rsim.BallState()
    ball_x, ball_y = _inside_field(rng, margin, L.BACK_WALL_Y - 1000)
    ball.pos = rsim.Vec(
        ball_x, ball_y, float(rng.uniform(L.BALL_RADIUS, 1200.0)) if rng.random() < 0.5 else L.BALL_REST_Z
    )
    ball.vel = rsim.Vec(*(float(v) for v in _random_vector(rng, ball_max_speed)))
    ball.ang_vel = rsim.Vec(0.0, 0.0, 0.0)
    arena.ball.set_state(ball)
    for car in cars:
        state = rsim.CarState()
        in_air = rng.random() < air_fraction
        z = float(rng.uniform(300.0, 1400.0)) if in_air else L.CAR_REST_Z
        state.pos = rsim.Vec(*_inside_field(rng, margin, L.BACK_WALL_Y - margin), z)
        yaw = float(rng.uniform(-np.pi, np.pi))
        if in_air:
            pitch, roll = (float(x) for x in rng.uniform(-np.pi / 2, np.pi / 2, size=2))
            vel = _random_vector(rng, car_max_speed)
        else:
            pitch = roll = 0.0
            speed = float(rng.uniform(0.0, car_max_speed))
            vel = np.array([np.cos(yaw) * speed, np.sin(yaw) * speed, 0.0])
        state.rot_mat = rsim.Angle(yaw, pitch, roll).as_rot_mat()
        state.vel = rsim.Vec(*(float(v) for v in vel))
        state.ang_vel = rsim.Vec(0.0, 0.0, 0.0)
        state.boost = float(rng.uniform(0.0, 100.0))
        state.is_on_ground = not in_air
        state.has_jumped = in_air
        car.set_state(state)


def _inside_field(rng: np.random.Generator, margin: float, max_abs_y: float) -> tuple[float, float]:
    """A random (x, y) inside the field: within the side and back walls and inside the 45-degree
    corner walls (``|x| + |y| <= CORNER_SUM``), ``margin`` away from each."""
    while True:
        x = float(rng.uniform(-L.SIDE_WALL_X + margin, L.SIDE_WALL_X - margin))
        y = float(rng.uniform(-max_abs_y, max_abs_y))
        if abs(x) + abs(y) <= L.CORNER_SUM - margin * 1.5:
            return x, y


def _random_vector(rng: np.random.Generator, max_norm: float) -> Array:
    direction = rng.normal(size=3)
    direction /= max(float(np.linalg.norm(direction)), 1e-6)
    return direction * rng.uniform(0.0, max_norm)


STATE_SETTERS: dict[str, StateSetter] = {"kickoff": kickoff, "random": random_state}
