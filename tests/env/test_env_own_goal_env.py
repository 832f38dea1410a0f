"""The environment keeps the ball's last touch across steps, and ``own_goal`` pays on real RocketSim physics."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import RocketSim as rsim

from speedflip.env import layout as L
from speedflip.env.vec_env import RocketLeagueVecEnv


def test_blue_car_driving_the_ball_into_its_own_goal_is_an_own_goal(
    make_env: Callable[..., RocketLeagueVecEnv],
) -> None:
    """Arena 0: the ball at rest 600 uu in front of blue's goal line (y = -5120), the blue car 500 uu upfield of it
    driving at 2,000 uu/s towards its own goal; the orange car parked at the far end. The blue car touches the ball,
    and it rolls into blue's net: ``own_goal`` pays blue 1 on the goal's step and nobody anything else. Arena 1 is
    left at its kickoff and pays nothing. The last touch is kept from the touching step to the goal's step and is
    cleared when the arena resets; the goal's ``StepResult.last_touch`` still names the blue car."""
    env = make_env(num_arenas=2, rewards={"own_goal": 1.0}, no_touch_timeout_seconds=30.0)
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
