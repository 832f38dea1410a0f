"""benchmarks/eval_opponents.py: the never-met opponents' decisions in states set by hand, for either side."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest

from benchmark_modules import load_benchmark

THROTTLE, STEER, PITCH, YAW, ROLL, JUMP, BOOST, HANDBRAKE = range(8)


@pytest.fixture(scope="module")
def opponents() -> ModuleType:
    return load_benchmark("eval_opponents")


def _state(
    ball: list[float], cars: list[list[float]], forward: list[list[float]], demoed: list[float] | None = None
) -> dict[str, Any]:
    """A 1v1 state: car 0 blue, car 1 orange, both at rest on the ground with 50 boost."""
    n = len(cars)
    return {
        "ball_position": np.array(ball),
        "ball_velocity": np.zeros(3),
        "car_position": np.array(cars),
        "car_velocity": np.zeros((n, 3)),
        "car_forward": np.array(forward),
        "car_boost": np.full(n, 50.0),
        "car_on_ground": np.ones(n),
        "car_is_demoed": np.zeros(n) if demoed is None else np.array(demoed),
        "car_team": np.array([0, 1]),
    }


def test_bumper_drives_at_the_opponent_car_not_the_ball(opponents: ModuleType) -> None:
    # blue at the centre facing +y, orange 2000 uu straight ahead facing blue (-y); the ball far to the side
    state = _state([3000.0, 0.0, 93.0], [[0.0, 0.0, 17.0], [0.0, 2000.0, 17.0]], [[0, 1, 0], [0, -1, 0]])
    c = opponents.bumper(state)
    # both face their prey head on: full throttle, no steer, boost (facing 1 > 0.8 with boost left)
    np.testing.assert_allclose(c[:, THROTTLE], [1.0, 1.0])
    np.testing.assert_allclose(c[:, STEER], [0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(c[:, BOOST], [1.0, 1.0])
    # the prey to blue's left (-x seen from a car facing +y is left): steer > 0 (counter-clockwise)
    state["car_position"][1] = [-2000.0, 200.0, 17.0]
    assert opponents.bumper(state)[0, STEER] > 0.9
    # no boost left: no boost; a demolished prey: nothing to hunt, throttle only
    state["car_boost"][:] = 0.0
    assert opponents.bumper(state)[0, BOOST] == 0.0
    state["car_is_demoed"][:] = [0.0, 1.0]
    c = opponents.bumper(state)
    np.testing.assert_allclose(c[0], [1.0, 0, 0, 0, 0, 0, 0, 0])


def test_shadow_waits_goal_side_and_challenges_a_ball_that_comes_to_it(opponents: ModuleType) -> None:
    d = opponents.SHADOW_DISTANCE
    # the ball at the centre; blue on its spot d back towards its goal, orange on its own spot (+y side), both
    # facing the ball: they stay (throttle 0, no steer)
    state = _state([0.0, 0.0, 93.0], [[0.0, -d, 17.0], [0.0, d, 17.0]], [[0, 1, 0], [0, -1, 0]])
    c = opponents.shadow(state)
    np.testing.assert_allclose(c[:, THROTTLE], [0.0, 0.0])
    np.testing.assert_allclose(c[:, STEER], [0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(c[:, BOOST], [0.0, 0.0])
    # the ball 500 uu in front of blue (within CHALLENGE_DISTANCE, blue goal-side of it): blue challenges with
    # full throttle and boost; orange is goal-side too (its goal is at +y) but 1900 uu away and the ball is not in
    # its third: it eases towards its new spot, no boost
    state["ball_position"] = np.array([0.0, -d + 500.0, 93.0])
    c = opponents.shadow(state)
    assert c[0, THROTTLE] == 1.0 and c[0, BOOST] == 1.0
    assert c[1, BOOST] == 0.0 and c[1, THROTTLE] < 1.0
    # a ball in blue's own third, 2600 uu away: still a challenge (the own third is always challenged)
    state["ball_position"] = np.array([0.0, -2000.0, 93.0])
    state["car_position"][0] = [0.0, -4600.0, 17.0]
    assert opponents.shadow(state)[0, BOOST] == 1.0
    # blue upfield of the ball (not goal-side): no challenge; its spot is far behind it: it turns round
    state["ball_position"] = np.array([0.0, 0.0, 93.0])
    state["car_position"][0] = [0.0, 1000.0, 17.0]
    c = opponents.shadow(state)
    assert c[0, BOOST] == 0.0 and abs(c[0, STEER]) == 1.0


@pytest.mark.parametrize("name", ["ball_chaser", "goalie", "bumper", "shadow"])
def test_every_opponent_plays_either_side_the_same_way(opponents: ModuleType, name: str) -> None:
    """The orange car in the mirror image (half a turn about z) of blue's state gets blue's controls."""
    rng = np.random.default_rng(0)
    bot = getattr(opponents, name)
    for _ in range(20):
        ball = rng.uniform([-3000, -4000, 93], [3000, 4000, 600])
        blue = rng.uniform([-3000, -4000, 17], [3000, 4000, 17])
        orange = rng.uniform([-3000, -4000, 17], [3000, 4000, 17])
        angle = rng.uniform(0, 2 * np.pi, 2)
        fwd = np.stack([np.cos(angle), np.sin(angle), np.zeros(2)], axis=1)
        turn = np.array([-1.0, -1.0, 1.0])
        state = _state(list(ball), [list(blue), list(orange)], fwd.tolist())
        state["ball_velocity"] = rng.uniform(-800, 800, 3)
        state["car_velocity"] = rng.uniform(-800, 800, (2, 3))
        mirrored = _state(list(ball * turn), [list(orange * turn), list(blue * turn)], (fwd[::-1] * turn).tolist())
        mirrored["ball_velocity"] = state["ball_velocity"] * turn
        mirrored["car_velocity"] = state["car_velocity"][::-1] * turn
        np.testing.assert_allclose(bot(state)[0], bot(mirrored)[1], atol=1e-5)
