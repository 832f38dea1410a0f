"""A scripted drive-at-the-ball policy touches the ball from kickoff; idle or straight driving does not."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import RocketSim as rsim

from speedflip.env import layout as L
from speedflip.env.vec_env import RocketLeagueVecEnv

STEPS = 60  # 60 steps x 8 ticks = 4 s of game time


def steer_towards_ball(env: RocketLeagueVecEnv) -> np.ndarray:
    """``[K, C]`` steer sign per car: the sign of the angle from the car's forward vector to the ball.

    Each car is read in its own team's perspective (0 for blue, 1 for orange). The angle is measured
    in the car's frame, positive towards the car's right, which is where positive steer turns.
    """
    st = env.state
    K, C = env.num_arenas, env.num_cars
    steer = np.zeros((K, C))
    for k in range(K):
        for c in range(C):
            p = int(env.car_teams[c])
            car, ball = st.cars[k, c, p], st.ball[k, p]
            to_ball = ball[L.BALL_POS] - car[L.CAR_POS]
            angle = np.arctan2(to_ball @ car[L.CAR_RIGHT], to_ball @ car[L.CAR_FORWARD])
            steer[k, c] = 0.0 if abs(angle) < 0.05 else np.sign(angle)
    return steer


def _start_off_axis(env: RocketLeagueVecEnv) -> None:
    """Reset to a kickoff, then put blue at the diagonal spots (-2048, -2560) in arena 0 and
    (2048, -2560) in arena 1 facing straight up the field (+y), so the ball is 38.7 degrees off to
    one side. Rocket League's frame is left-handed: facing +y, the car's right is -x, so the car must
    steer left in arena 0 and right in arena 1. Orange gets the mirror.
    """
    env.reset()
    for k in range(env.num_arenas):
        x = -2048.0 if k % 2 == 0 else 2048.0
        for c, team in enumerate(env.car_teams.tolist()):
            sign = 1.0 if team == L.BLUE else -1.0
            state = rsim.CarState()
            state.pos = rsim.Vec(sign * x, sign * -2560.0, L.CAR_REST_Z)
            state.rot_mat = rsim.Angle(sign * np.pi / 2, 0.0, 0.0).as_rot_mat()
            state.boost = 100.0 / 3.0
            env.arenas.cars[k][c].set_state(state)
    env.arenas.read_all()


def _play(env: RocketLeagueVecEnv, policy: Callable[[], np.ndarray]) -> np.ndarray:
    """Run ``STEPS`` steps; returns, per arena, whether any car got a touch reward."""
    touched = np.zeros(env.num_arenas, bool)
    for _ in range(STEPS):
        res = env.step(policy().ravel())
        assert not (res.terminated.any() or res.truncated.any())
        touched |= (res.rewards > 0).reshape(env.num_arenas, -1).any(axis=1)
    return touched


def test_positive_steer_turns_towards_the_right_vector(
    make_env: Callable[..., RocketLeagueVecEnv], ground_row: Callable[..., int]
) -> None:
    """The convention the scripted policy relies on: steer +1 curves the car to its CAR_RIGHT side."""
    env = make_env(num_arenas=1, blue_size=1, orange_size=0, state_setters={"kickoff": 1.0})
    _start_off_axis(env)
    car = env.state.cars[0, 0, 0]
    start, right = car[L.CAR_POS].copy(), car[L.CAR_RIGHT].copy()
    np.testing.assert_allclose(right, [-1.0, 0.0, 0.0], atol=1e-5)  # facing +y, right is -x
    for _ in range(10):
        env.step(np.array([ground_row(1.0, 1.0)]))
    assert (env.state.cars[0, 0, 0, L.CAR_POS] - start) @ right > 100.0


@pytest.mark.parametrize("orange_size", [0, 1])
def test_drive_at_ball_touches_it(
    make_env: Callable[..., RocketLeagueVecEnv], ground_row: Callable[..., int], orange_size: int
) -> None:
    """Full throttle and boost, steering at the ball, reaches it within 4 s in every arena."""
    env = make_env(
        num_arenas=2, blue_size=1, orange_size=orange_size, state_setters={"kickoff": 1.0}, rewards={"touch": 1.0}
    )
    _start_off_axis(env)
    rows = {s: ground_row(1.0, s, boost=1.0) for s in (-1.0, 0.0, 1.0)}
    np.testing.assert_array_equal(steer_towards_ball(env)[:, 0], [-1.0, 1.0])  # left, then right
    touched = _play(env, lambda: np.vectorize(rows.__getitem__)(steer_towards_ball(env)))
    assert touched.all(), "every arena got a touch"
    assert env.total_touches > 0


def test_drive_at_ball_from_random_kickoffs(
    make_env: Callable[..., RocketLeagueVecEnv], ground_row: Callable[..., int]
) -> None:
    """The same policy from the env's own kickoffs (4 arenas, 1v1) touches the ball in every arena."""
    env = make_env(num_arenas=4, blue_size=1, orange_size=1, state_setters={"kickoff": 1.0}, rewards={"touch": 1.0})
    env.reset()
    rows = {s: ground_row(1.0, s, boost=1.0) for s in (-1.0, 0.0, 1.0)}
    assert _play(env, lambda: np.vectorize(rows.__getitem__)(steer_towards_ball(env))).all()


def test_idle_policy_does_not_touch(
    make_env: Callable[..., RocketLeagueVecEnv], ground_row: Callable[..., int]
) -> None:
    """The all-zero (neutral) row leaves the cars at their kickoff spots: no touch in the same time."""
    env = make_env(num_arenas=2, blue_size=1, orange_size=1, state_setters={"kickoff": 1.0}, rewards={"touch": 1.0})
    env.reset()
    start = env.state.cars[:, :, 0, L.CAR_POS].copy()
    idle = ground_row(0.0, 0.0)
    assert not _play(env, lambda: np.full(env.num_agents, idle)).any()
    assert env.total_touches == 0
    np.testing.assert_allclose(env.state.cars[:, :, 0, L.CAR_POS], start, atol=1.0)


def test_driving_straight_misses(make_env: Callable[..., RocketLeagueVecEnv], ground_row: Callable[..., int]) -> None:
    """From the off-axis start, full throttle without steering passes 2048 uu beside the ball."""
    env = make_env(num_arenas=2, blue_size=1, orange_size=1, state_setters={"kickoff": 1.0}, rewards={"touch": 1.0})
    _start_off_axis(env)
    straight = ground_row(1.0, 0.0, boost=1.0)
    assert not _play(env, lambda: np.full(env.num_agents, straight)).any()
    assert env.total_touches == 0
