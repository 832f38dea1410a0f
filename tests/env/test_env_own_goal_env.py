"""The environment keeps the ball's last touch across steps, and ``own_goal`` pays on real RocketSim physics."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import RocketSim as rsim

from speedflip.env import layout as L
from speedflip.env.vec_env import RocketLeagueVecEnv


def _blue_drives_into_own_goal(env: RocketLeagueVecEnv) -> tuple[int, int]:
    """Reset ``env`` and set arena 0 up: the ball at rest 600 uu in front of blue's goal line, the blue car 500 uu
    upfield of it driving at 2,000 uu/s towards its own goal, the orange car parked at the far end. Returns the blue
    and orange car columns."""
    env.reset()
    blue, orange = int(np.flatnonzero(env.car_teams == L.BLUE)[0]), int(np.flatnonzero(env.car_teams == L.ORANGE)[0])
    arena, cars = env.arenas.arenas[0], env.arenas.cars[0]
    ball = rsim.BallState()
    ball.pos = rsim.Vec(0.0, -4520.0, 93.0)
    arena.ball.set_state(ball)
    car = rsim.CarState()
    car.pos = rsim.Vec(0.0, -4020.0, 17.0)
    car.vel = rsim.Vec(0.0, -2000.0, 0.0)
    car.rot_mat = rsim.Angle(-np.pi / 2, 0.0, 0.0).as_rot_mat()  # facing -y, its own goal
    cars[blue].set_state(car)
    parked = rsim.CarState()
    parked.pos = rsim.Vec(0.0, 4500.0, 17.0)
    cars[orange].set_state(parked)
    env.arenas._read(0)
    return blue, orange


def test_blue_car_driving_the_ball_into_its_own_goal_is_an_own_goal(
    make_env: Callable[..., RocketLeagueVecEnv],
) -> None:
    """Arena 0: the ball at rest 600 uu in front of blue's goal line (y = -5120), the blue car 500 uu upfield of it
    driving at 2,000 uu/s towards its own goal; the orange car parked at the far end. The blue car touches the ball,
    and it rolls into blue's net: ``own_goal`` pays blue 1 on the goal's step and nobody anything else. Arena 1 is
    left at its kickoff and pays nothing. The last touch is kept from the touching step to the goal's step and is
    cleared when the arena resets; the goal's ``StepResult.last_touch`` still names the blue car."""
    env = make_env(num_arenas=2, rewards={"own_goal": 1.0}, no_touch_timeout_seconds=30.0)
    blue, orange = _blue_drives_into_own_goal(env)

    coast = np.zeros(env.num_agents, np.int64)  # the table's first row; the car rolls on at its speed
    totals = np.zeros((2, 2))
    touched_before_goal = False
    for _ in range(60):  # 4 s of game time
        result = env.step(coast)
        rewards = result.rewards.reshape(2, 2)
        totals += rewards
        if result.goal_team[0] >= 0:
            assert result.goal_team[0] == L.ORANGE  # blue's own goal counts for orange
            assert rewards[0, blue] == 1.0 and rewards[0, orange] == 0.0
            assert not env.last_touch[0].any()  # the arena reset after the goal ...
            assert result.last_touch[0, blue] and not result.last_touch[0, orange]  # ... the step reports it before
            break
        touched_before_goal |= bool(result.touched[0, blue])
        if touched_before_goal:
            assert env.last_touch[0, blue] and not env.last_touch[0, orange]  # kept on steps without a touch
    else:
        raise AssertionError("the ball never went in")
    assert touched_before_goal
    np.testing.assert_array_equal(totals, [[1.0 if c == blue else 0.0 for c in range(2)], [0.0, 0.0]])


def test_zero_sum_rewards_share_out_but_the_episode_return_counts_each_cars_own(
    make_env: Callable[..., RocketLeagueVecEnv],
) -> None:
    """``env.opponent_scale=1``: a car is paid its own reward minus its opponent's. The own-goal play above with only
    ``touch`` (1 per step a car touches the ball): on every step blue is paid +t and orange -t, where t is blue's
    touches that step (orange never touches), so the arena's rewards sum to 0 on every step. The episode's reported
    return is what the cars earned themselves before that sharing, the mean over the 2 cars of (blue's touches, 0):
    touches / 2 (by hand), not the distributed sum's 0, which would print a flat 0 on every progress line."""
    env = make_env(num_arenas=1, rewards={"touch": 1.0}, opponent_scale=1.0, no_touch_timeout_seconds=30.0)
    blue, orange = _blue_drives_into_own_goal(env)
    coast = np.zeros(env.num_agents, np.int64)
    blue_touches = 0
    for _ in range(60):
        result = env.step(coast)
        assert result.touched is not None
        touches = int(result.touched[0, blue])
        assert not result.touched[0, orange]
        blue_touches += touches
        np.testing.assert_array_equal(result.rewards, [touches if c == blue else -touches for c in range(2)])
        if result.episodes:
            break
    else:
        raise AssertionError("the ball never went in")
    assert blue_touches >= 1
    assert result.episodes[0]["return"] == blue_touches / 2
