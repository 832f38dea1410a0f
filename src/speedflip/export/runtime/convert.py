"""RLBot game state -> the state arrays training used (RocketSim's gym-state layout, both perspectives).

The bot turns each RLBot v5 packet into an ``rlgym_compat.GameState`` (RLGym's compatibility layer:
boost pads in RocketSim's order, rotation matrices, the inverted view of the orange side) and then
calls :func:`compat_to_arrays`. Only the attributes named in the protocols below are read, so the
same path runs on any object that has them (the parity test feeds recorded RocketSim states).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from speedflip._types import Array
from speedflip.env import layout as L
from speedflip.env.arenas import GameArrays


class PhysicsLike(Protocol):
    """``rlgym_compat.PhysicsObject``: world vectors and a rotation matrix with columns forward, right, up."""

    position: Array
    linear_velocity: Array
    angular_velocity: Array

    @property
    def rotation_mtx(self) -> Array: ...

    @property
    def quaternion(self) -> Array: ...


class CarLike(Protocol):
    """``rlgym_compat.Car``."""

    team_num: int
    boost_amount: float

    @property
    def on_ground(self) -> bool: ...

    @property
    def is_demoed(self) -> bool: ...

    @property
    def physics(self) -> Any: ...

    @property
    def inverted_physics(self) -> Any: ...


class StateLike(Protocol):
    """``rlgym_compat.GameState``: cars by agent id, the ball, pad timers (0 = available) in RocketSim's order."""

    cars: Mapping[Any, Any]
    ball: Any
    boost_pad_timers: Array

    @property
    def inverted_ball(self) -> Any: ...

    @property
    def inverted_boost_pad_timers(self) -> Array: ...


def _ball_row(ball: PhysicsLike) -> Array:
    row = np.zeros(L.BALL_WIDTH, np.float32)
    row[L.BALL_POS] = ball.position
    row[L.BALL_QUAT] = ball.quaternion
    row[L.BALL_VEL] = ball.linear_velocity
    row[L.BALL_ANG_VEL] = ball.angular_velocity
    return row


def _car_row(car: CarLike, physics: PhysicsLike, car_id: int) -> Array:
    row = np.zeros(L.CAR_WIDTH, np.float32)
    rot = np.asarray(physics.rotation_mtx, np.float32)
    row[L.CAR_ID] = car_id
    row[L.CAR_TEAM] = car.team_num
    row[L.CAR_IS_DEMOED] = float(car.is_demoed)
    row[L.CAR_ON_GROUND] = float(car.on_ground)
    row[L.CAR_BOOST] = car.boost_amount
    row[L.CAR_POS] = physics.position
    row[L.CAR_QUAT] = physics.quaternion
    row[L.CAR_VEL] = physics.linear_velocity
    row[L.CAR_ANG_VEL] = physics.angular_velocity
    row[L.CAR_FORWARD] = rot[:, 0]
    row[L.CAR_RIGHT] = rot[:, 1]
    row[L.CAR_UP] = rot[:, 2]
    return row


def car_order(state: StateLike) -> list[Any]:
    """Agent ids as training orders cars: blue first, then orange, each in the packet's order."""
    ids = list(state.cars)
    return [i for i in ids if state.cars[i].team_num == 0] + [i for i in ids if state.cars[i].team_num != 0]


def compat_to_arrays(state: StateLike) -> tuple[GameArrays, list[Any], int, int]:
    """``(arrays with K = 1, agent ids in row order, blue size, orange size)``."""
    order = car_order(state)
    cars = np.zeros((1, len(order), 2, L.CAR_WIDTH), np.float32)
    for c, agent_id in enumerate(order):
        car = state.cars[agent_id]
        cars[0, c, 0] = _car_row(car, car.physics, c + 1)
        cars[0, c, 1] = _car_row(car, car.inverted_physics, c + 1)
    ball = np.stack([_ball_row(state.ball), _ball_row(state.inverted_ball)])[None]
    timers = np.asarray(state.boost_pad_timers, np.float32)
    inverted = np.asarray(state.inverted_boost_pad_timers, np.float32)
    pads = np.stack([(timers == 0), (inverted == 0)]).astype(np.float32)[None]
    blue = sum(1 for i in order if state.cars[i].team_num == 0)
    arrays = GameArrays(ball=ball, cars=cars, pads=pads, scores=np.zeros((1, 2), np.int64))
    return arrays, order, blue, len(order) - blue
