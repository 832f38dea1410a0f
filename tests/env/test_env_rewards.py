"""Reward components on hand-built states, for both teams, and their weighted sum."""

from __future__ import annotations

import numpy as np
import pytest

from speedflip.env import layout as L
from speedflip.env.arenas import GameArrays
from speedflip.env.rewards import (
    REWARD_COMPONENTS,
    RewardContext,
    WeightedReward,
    aimed_hit,
    aimed_touch,
    align_ball_goal,
    face_ball,
    goal,
    goal_mouth_distance,
    goal_mouth_potential,
    goal_mouth_progress,
    on_target_touch,
    own_goal,
    own_goal_touch,
    touch,
    velocity_ball_to_goal,
    velocity_player_to_ball,
)

MIRROR = np.array([-1.0, -1.0, 1.0], np.float32)  # perspective 1: rotated 180 degrees about z
Z = L.GOAL_CENTER_Z  # everything at goal-centre height keeps the directions in the xy plane


def _set_ball(state: GameArrays, k: int, pos: list[float], vel: list[float]) -> None:
    for p, flip in ((0, np.ones(3, np.float32)), (1, MIRROR)):
        state.ball[k, p, L.BALL_POS] = np.asarray(pos, np.float32) * flip
        state.ball[k, p, L.BALL_VEL] = np.asarray(vel, np.float32) * flip


def _set_car(state: GameArrays, k: int, c: int, pos: list[float], vel: list[float], fwd: list[float]) -> None:
    for p, flip in ((0, np.ones(3, np.float32)), (1, MIRROR)):
        state.cars[k, c, p, L.CAR_POS] = np.asarray(pos, np.float32) * flip
        state.cars[k, c, p, L.CAR_VEL] = np.asarray(vel, np.float32) * flip
        state.cars[k, c, p, L.CAR_FORWARD] = np.asarray(fwd, np.float32) * flip


def _one_v_one() -> RewardContext:
    """Arena 0, in blue's (world) coordinates:

    - ball at (0, 2211.25, Z) moving (0, 3000, 0): 3000 uu from the orange goal centre
      (0, 5211.25, Z), straight at it.
    - blue car at (-2400, 411.25, Z): the ball is (2400, 1800, 0) away, unit (0.8, 0.6, 0);
      velocity (1150, 0, 0), forward (0, 1, 0).
    - orange car at (0, 4211.25, Z): the ball is (0, -2000, 0) away, unit (0, -1, 0);
      velocity (0, -1150, 0), forward (0.6, -0.8, 0).

    Arena 1: ball at (-3000, 1211.25, Z) moving (1200, 0, 0); blue goal-to-ball direction
    (3000, 4000, 0) / 5000. Cars at rest facing away from the ball.
    """
    state = GameArrays.empty(num_arenas=2, num_cars=2)
    _set_ball(state, 0, [0.0, 2211.25, Z], [0.0, 3000.0, 0.0])
    _set_car(state, 0, 0, [-2400.0, 411.25, Z], [1150.0, 0.0, 0.0], [0.0, 1.0, 0.0])
    _set_car(state, 0, 1, [0.0, 4211.25, Z], [0.0, -1150.0, 0.0], [0.6, -0.8, 0.0])
    _set_ball(state, 1, [-3000.0, 1211.25, Z], [1200.0, 0.0, 0.0])
    _set_car(state, 1, 0, [-3000.0, 0.0, Z], [0.0, 0.0, 0.0], [0.0, -1.0, 0.0])
    _set_car(state, 1, 1, [-3000.0, 2422.5, Z], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0])
    return RewardContext(
        state=state,
        car_teams=np.array([L.BLUE, L.ORANGE]),
        touched=np.array([[True, False], [False, False]]),
        goal_team=np.array([-1, -1]),
    )


def test_velocity_player_to_ball_by_hand() -> None:
    """Speed towards the ball / 2300: blue 1150 * 0.8 / 2300 = 0.4, orange 1150 / 2300 = 0.5."""
    value = velocity_player_to_ball(_one_v_one())
    assert value.shape == (2, 2)
    assert value.dtype == np.float32
    np.testing.assert_allclose(value, [[0.4, 0.5], [0.0, 0.0]], atol=1e-6)


def test_face_ball_by_hand() -> None:
    """Cosine(forward, to-ball): blue (0,1,0).(0.8,0.6,0) = 0.6; orange (0.6,-0.8,0).(0,-1,0) = 0.8.

    Arena 1: blue faces -y with the ball straight at +y (-1); orange faces +y with the ball at -y (-1).
    """
    np.testing.assert_allclose(face_ball(_one_v_one()), [[0.6, 0.8], [-1.0, -1.0]], atol=1e-6)


def test_velocity_ball_to_goal_by_hand() -> None:
    """Ball speed towards each team's opponent goal / 6000.

    Arena 0: straight at orange's goal: blue +3000/6000 = +0.5, orange -0.5.
    Arena 1, blue: (1200, 0, 0).(0.6, 0.8, 0) = 720 -> 0.12. Orange view: ball at (3000, -1211.25),
    moving (-1200, 0, 0); its opponent goal is at (0, 5211.25): direction (-3000, 6422.5) / 7088.62,
    1200 * 3000 / 7088.62 = 507.857 -> 0.0846428.
    """
    np.testing.assert_allclose(velocity_ball_to_goal(_one_v_one()), [[0.5, -0.5], [0.12, 0.0846428]], atol=1e-5)


def test_aimed_touch_by_hand() -> None:
    """(1 + cos) / 2 of the ball's direction against the direction to each car's opponent goal, on touches.

    Arena 0: the ball flies straight at orange's goal: blue 1.0, orange (at its own goal) 0.0.
    Arena 1: blue cos = 720 / 1200 = 0.6 -> 0.8; orange cos = 507.857 / 1200 = 0.4232143 -> 0.7116071
    (the dot products of test_velocity_ball_to_goal_by_hand). Untouched cars get 0, a ball at rest 0.5.
    """
    ctx = _one_v_one()
    ctx.touched = np.ones((2, 2), bool)
    np.testing.assert_allclose(aimed_touch(ctx), [[1.0, 0.0], [0.8, 0.7116071]], atol=1e-5)
    ctx.touched = np.array([[True, False], [False, True]])
    np.testing.assert_allclose(aimed_touch(ctx), [[1.0, 0.0], [0.0, 0.7116071]], atol=1e-5)
    ctx.state.ball[:, :, L.BALL_VEL] = 0.0
    np.testing.assert_allclose(aimed_touch(ctx), [[0.5, 0.0], [0.0, 0.5]], atol=1e-6)


def test_on_target_touch_by_hand() -> None:
    """1 on a touch that leaves the ball heading between the opponent's posts, in a straight horizontal line.

    Arena 0 of ``_one_v_one``: the ball flies straight at orange's goal: blue 1, orange (the ball flies at its
    own goal, away from the one it attacks) 0. Arena 1: the ball moves along x only, towards neither goal: 0.
    Then the ball at (0, 2120) in arena 0 reaches the goal line (y = 5120) after (5120 - 2120) / 3000 = 1 s, at
    x = vx * 1 s: on target up to 892.755 - 91.25 = 801.505 uu (vx 800: 1; vx 803: 0, a near miss that
    ``aimed_touch`` still pays (1 + 3000 / 3106) / 2 = 0.983). A cross from (-2000, 4000) moving (1500, 1000)
    reaches the line after 1.12 s at x = -2000 + 1680 = -320: on target. Untouched cars get 0.
    """
    ctx = _one_v_one()
    ctx.touched = np.ones((2, 2), bool)
    np.testing.assert_array_equal(on_target_touch(ctx), [[1.0, 0.0], [0.0, 0.0]])
    ctx.touched = np.array([[False, True], [True, True]])
    np.testing.assert_array_equal(on_target_touch(ctx), [[0.0, 0.0], [0.0, 0.0]])
    ctx.touched = np.ones((2, 2), bool)
    for vx, expected in ((800.0, 1.0), (-800.0, 1.0), (803.0, 0.0), (-803.0, 0.0)):
        _set_ball(ctx.state, 0, [0.0, 2120.0, Z], [vx, 3000.0, 0.0])
        assert on_target_touch(ctx)[0, 0] == expected, vx
    assert aimed_touch(ctx)[0, 0] == pytest.approx((1.0 + 3000.0 / np.hypot(803.0, 3000.0 - 0.0)) / 2.0, abs=0.01)
    _set_ball(ctx.state, 0, [-2000.0, 4000.0, Z], [1500.0, 1000.0, 0.0])
    np.testing.assert_array_equal(on_target_touch(ctx)[0], [1.0, 0.0])
    _set_ball(ctx.state, 0, [-2000.0, 4000.0, Z], [1500.0, -1000.0, 0.0])  # away from the goal: 0
    np.testing.assert_array_equal(on_target_touch(ctx)[0], [0.0, 0.0])


def test_own_goal_by_hand() -> None:
    """1 to the car that touched the ball last when its own team conceded; 0 for every other case.

    Four 1v1 arenas (car 0 blue, car 1 orange), the goal and the latest touch set by hand:
    arena 0: orange scored, blue touched last -> blue's own goal: [1, 0];
    arena 1: orange scored, orange touched last -> an ordinary goal: [0, 0];
    arena 2: blue scored, both cars touched in the last touching step -> counts for neither: [0, 0];
    arena 3: no goal, blue touched last -> [0, 0].
    Without ``last_touch`` the step's own touches stand in for it (arena 0's blue car touched in the step: 1).
    """
    state = GameArrays.empty(num_arenas=4, num_cars=2)
    teams = np.array([L.BLUE, L.ORANGE])
    goal_team = np.array([L.ORANGE, L.ORANGE, L.BLUE, -1])
    last = np.array([[True, False], [False, True], [True, True], [True, False]])
    ctx = RewardContext(state, teams, np.zeros((4, 2), bool), goal_team, last_touch=last)
    np.testing.assert_array_equal(own_goal(ctx), [[1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    assert own_goal(ctx).dtype == np.float32
    ctx = RewardContext(state, teams, np.array([[True, False]] + [[False, False]] * 3), goal_team)
    np.testing.assert_array_equal(own_goal(ctx), [[1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])


def test_own_goal_touch_by_hand() -> None:
    """1 on a touch that turns the ball towards the car's own posts, in a straight horizontal line.

    The balls were at rest before the step (heading nowhere). Arena 0 of ``_one_v_one``: the ball flies straight at
    orange's goal: orange 1 (its own goal), blue 0 (it attacks that goal). Arena 1: the ball moves along x only,
    towards neither goal: 0. Then, in blue's coordinates, the ball at (0, -2120) moving (vx, -3000) reaches blue's
    goal line (y = -5120) after 1 s at x = vx: into the own goal up to |vx| = 801.505 (vx 800: 1; 803: 0). A ball
    moving away from the own goal costs 0 (and orange, whose goal it flies at, 1). From (-2000, -4000) moving
    (vx, -1000) the ball reaches y = -5120 after 1.12 s at x = -2000 + 1.12 vx: -320 for vx 1500 (1), 800 for 2500
    (1), 1024 for 2700 (0: past the post). A
    ball that was heading in before the step too (a save that failed) costs 0. Untouched cars get 0.
    """
    ctx = _one_v_one()
    ctx.prev_state = ctx.state.copy()
    ctx.prev_state.ball[:, :, L.BALL_VEL] = 0.0
    ctx.touched = np.ones((2, 2), bool)
    np.testing.assert_array_equal(own_goal_touch(ctx), [[0.0, 1.0], [0.0, 0.0]])
    ctx.touched = np.array([[True, False], [True, True]])
    np.testing.assert_array_equal(own_goal_touch(ctx), [[0.0, 0.0], [0.0, 0.0]])
    ctx.touched = np.ones((2, 2), bool)
    for vx, expected in ((800.0, 1.0), (-800.0, 1.0), (803.0, 0.0), (-803.0, 0.0)):
        _set_ball(ctx.state, 0, [0.0, -2120.0, Z], [vx, -3000.0, 0.0])
        assert own_goal_touch(ctx)[0, 0] == expected, vx
        assert own_goal_touch(ctx)[0, 1] == 0.0, vx  # for orange the same ball flies away from its goal
    _set_ball(ctx.state, 0, [0.0, -2120.0, Z], [0.0, 3000.0, 0.0])  # away from blue's goal, at orange's
    np.testing.assert_array_equal(own_goal_touch(ctx)[0], [0.0, 1.0])
    for vx, expected in ((1500.0, 1.0), (2500.0, 1.0), (2700.0, 0.0)):
        _set_ball(ctx.state, 0, [-2000.0, -4000.0, Z], [vx, -1000.0, 0.0])
        assert own_goal_touch(ctx)[0, 0] == expected, vx
    _set_ball(ctx.state, 0, [-2000.0, -4000.0, Z], [1500.0, -1000.0, 0.0])
    assert own_goal_touch(ctx)[0, 0] == 1.0
    ctx.prev_state.ball[:] = ctx.state.ball  # heading in before the step as well: not this touch's doing
    assert own_goal_touch(ctx)[0, 0] == 0.0
    ctx.prev_state = None  # no state before the step: treated as unchanged, so nothing turned
    assert own_goal_touch(ctx)[0, 0] == 0.0


def test_aimed_hit_by_hand() -> None:
    """The aim of ``aimed_touch`` times the change of the ball's velocity / 6000, on touches.

    Both balls were at rest before the step. Arena 0: |dv| = 3000 -> 0.5; blue aim 1.0 -> 0.5, orange aim 0 -> 0.
    Arena 1: |dv| = 1200 -> 0.2; blue 0.8 * 0.2 = 0.16, orange 0.7116071 * 0.2 = 0.1423214. A ball whose velocity
    the touch did not change pays nothing, however well aimed; an untouched car gets 0.
    """
    ctx = _one_v_one()
    ctx.touched = np.ones((2, 2), bool)
    ctx.prev_state = GameArrays.empty(num_arenas=2, num_cars=2)
    ctx.prev_state.ball[:] = ctx.state.ball
    ctx.prev_state.ball[:, :, L.BALL_VEL] = 0.0
    np.testing.assert_allclose(aimed_hit(ctx), [[0.5, 0.0], [0.16, 0.1423214]], atol=1e-5)
    ctx.touched = np.array([[True, False], [False, True]])
    np.testing.assert_allclose(aimed_hit(ctx), [[0.5, 0.0], [0.0, 0.1423214]], atol=1e-5)
    ctx.prev_state.ball[:] = ctx.state.ball  # the same velocity before and after: a push along
    np.testing.assert_allclose(aimed_hit(ctx), [[0.0, 0.0], [0.0, 0.0]], atol=1e-6)


def test_touch_is_the_touch_flag() -> None:
    np.testing.assert_array_equal(touch(_one_v_one()), [[1.0, 0.0], [0.0, 0.0]])


def test_goal_by_hand_two_v_two() -> None:
    """+1 to the scoring team, -1 to the conceding team, 0 without a goal (three 2v2 arenas)."""
    ctx = RewardContext(
        state=GameArrays.empty(3, 4),
        car_teams=np.array([L.BLUE, L.BLUE, L.ORANGE, L.ORANGE]),
        touched=np.zeros((3, 4), bool),
        goal_team=np.array([L.BLUE, L.ORANGE, -1]),
    )
    np.testing.assert_array_equal(goal(ctx), [[1, 1, -1, -1], [-1, -1, 1, 1], [0, 0, 0, 0]])


def test_perspective_rows_are_used() -> None:
    """Components read each car's own perspective row: corrupting orange's row changes only orange."""
    ctx = _one_v_one()
    before = velocity_player_to_ball(ctx)
    ctx.state.cars[0, 1, 1, L.CAR_VEL] *= -1.0  # orange's view of its own velocity
    after = velocity_player_to_ball(ctx)
    assert after[0, 0] == before[0, 0]
    assert after[0, 1] == pytest.approx(-0.5)
    ctx.state.cars[0, 0, 1, L.CAR_VEL] = 0.0  # blue's car in orange's view: blue ignores it
    assert velocity_player_to_ball(ctx)[0, 0] == before[0, 0]


def test_weighted_reward_sums_and_records_means() -> None:
    """Weighted sum by hand, zero weights dropped, last_means holds each used component's mean."""
    ctx = _one_v_one()
    ctx.goal_team = np.array([L.ORANGE, -1])
    fn = WeightedReward({"goal": 10.0, "touch": 1.0, "face_ball": 0.5, "velocity_player_to_ball": 0.0})
    total = fn(ctx)
    # goal [[-1, 1], [0, 0]] * 10 + touch [[1, 0], [0, 0]] + face [[0.6, 0.8], [-1, -1]] * 0.5
    np.testing.assert_allclose(total, [[-8.7, 10.4], [-0.5, -0.5]], atol=1e-5)
    assert total.dtype == np.float32
    assert set(fn.last_means) == {"goal", "touch", "face_ball"}
    assert fn.last_means["goal"] == pytest.approx(0.0)
    assert fn.last_means["touch"] == pytest.approx(0.25)
    assert fn.last_means["face_ball"] == pytest.approx((0.6 + 0.8 - 1.0 - 1.0) / 4, abs=1e-6)


def test_weighted_reward_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match=r"unknown reward component\(s\) \['goals'\]"):
        WeightedReward({"goals": 1.0, "touch": 1.0})


def test_all_components_registered_and_bounded() -> None:
    """Every registered component returns one float32 per car, within [-1, 1] on the hand-built state."""
    ctx = _one_v_one()
    assert {"goal", "touch", "velocity_player_to_ball", "velocity_ball_to_goal", "face_ball"} <= set(REWARD_COMPONENTS)
    for name, fn in REWARD_COMPONENTS.items():
        value = fn(ctx)
        assert value.shape == (2, 2), name
        assert value.dtype == np.float32, name
        assert np.all(np.abs(value) <= 1.0 + 1e-6), name


def test_align_ball_goal_by_hand() -> None:
    """The mean of cos(car->ball, own goal->car) and cos(car->ball, car->opponent goal), goals at
    y = -+5211.25 (z = Z).

    Arena 0: ball (0, 1000). Blue car (0, 0): car->ball (0, 1), own goal->car (0, 1), car->opp goal
    (0, 1): (1 + 1) / 2 = 1. Orange car (0, 3000) is between the ball and its goal (+y): in its own view car
    (0, -3000), ball (0, -1000), all three directions (0, 1): 1.
    Arena 1: ball (0, -4000) near blue's goal. Blue car (0, -2000) upfield of it: car->ball (0, -1),
    the other two (0, 1): (-1 - 1) / 2 = -1 (the own-goal position). Orange car (0, 4000): own view
    car (0, -4000), ball (0, 4000): 1.
    Arena 2: ball (3000, -211.25), blue car (3000, -1211.25): car->ball (0, 1); own goal->car
    (3000, 4000) / 5000, cos 0.8; car->opp goal (-3000, 6422.5), cos 6422.5 / 7088.618 = 0.906030;
    (0.8 + 0.906030) / 2 = 0.853015. Orange car (0, 5000): own view car (0, -5000), ball (-3000, 211.25): car->ball
    (-3000, 5211.25) / 6013.082; own goal->car (0, 211.25) and car->opp goal (0, 10211.25) both (0, 1):
    5211.25 / 6013.082 = 0.866652.
    """
    state = GameArrays.empty(num_arenas=3, num_cars=2)
    for k, (ball, blue, orange) in enumerate(
        [
            ([0.0, 1000.0, Z], [0.0, 0.0, Z], [0.0, 3000.0, Z]),
            ([0.0, -4000.0, Z], [0.0, -2000.0, Z], [0.0, 4000.0, Z]),
            ([3000.0, -211.25, Z], [3000.0, -1211.25, Z], [0.0, 5000.0, Z]),
        ]
    ):
        _set_ball(state, k, ball, [0.0, 0.0, 0.0])
        _set_car(state, k, 0, blue, [0.0, 0.0, 0.0], [0.0, 1.0, 0.0])
        _set_car(state, k, 1, orange, [0.0, 0.0, 0.0], [0.0, -1.0, 0.0])
    ctx = RewardContext(state, np.array([L.BLUE, L.ORANGE]), np.zeros((3, 2), bool), np.full(3, -1))
    np.testing.assert_allclose(align_ball_goal(ctx), [[1.0, 1.0], [-1.0, 1.0], [0.853015, 0.866652]], atol=1e-5)


def test_goal_mouth_distance_by_hand() -> None:
    """The mouth of the goal at y = 5120: ball centres with |x| <= 892.755 - 91.25 = 801.505 and
    91.25 <= z <= 642.775 - 91.25 = 551.525. Beside the post (1100, 5000, 100): (298.495, -120, 0) away, 321.713;
    in front (0, 4000, 300): 1120; behind the line (0, 5200, 300): 80; over the bar (0, 5120, 700): 148.475."""
    pos = np.array([[1100.0, 5000.0, 100.0], [0.0, 4000.0, 300.0], [0.0, 5200.0, 300.0], [0.0, 5120.0, 700.0]])
    np.testing.assert_allclose(
        goal_mouth_distance(pos, L.BACK_WALL_Y), [np.hypot(298.495, 120.0), 1120.0, 80.0, 148.475], rtol=1e-6
    )
    # the own goal's mouth is the mirror image at y = -5120: midfield is 5120 from both, phi = 0
    assert goal_mouth_distance(np.array([0.0, 0.0, 300.0]), -L.BACK_WALL_Y) == pytest.approx(5120.0)
    assert goal_mouth_potential(np.array([0.0, 0.0, 300.0])) == pytest.approx(0.0, abs=1e-7)
    # phi on the opponent's goal mouth: 1 - exp(-10240 / 1500)
    assert goal_mouth_potential(np.array([0.0, 5120.0, 300.0])) == pytest.approx(1.0 - np.exp(-10240.0 / 1500.0))


def _ball_moves(before: list[list[float]], after: list[list[float]], goal_team: list[int]) -> RewardContext:
    prev_state = GameArrays.empty(num_arenas=len(before), num_cars=2)
    state = GameArrays.empty(num_arenas=len(after), num_cars=2)
    for k, (b, a) in enumerate(zip(before, after, strict=True)):
        _set_ball(prev_state, k, b, [0.0, 0.0, 0.0])
        _set_ball(state, k, a, [0.0, 0.0, 0.0])
    teams = np.array([L.BLUE, L.ORANGE])
    return RewardContext(state, teams, np.zeros((len(after), 2), bool), np.array(goal_team), prev_state)


def test_goal_mouth_progress_by_hand() -> None:
    """0.99 * phi(after) - phi(before), phi = exp(-d_opp / 1500) - exp(-d_own / 1500), 0 after a goal.

    Arena 0: the ball moves from (0, 3620, Z) to (0, 4120, Z): for blue d_opp 1500 -> 1000 and d_own 8740 -> 9240;
    orange sees the same ball with the goals swapped, phi_orange = -phi_blue, so its reward is minus blue's.
    Arena 1: the ball stays at (0, 4120, Z): the price of holding it, -0.01 phi. Arena 2: blue scores from
    (0, 5100, Z) (d_opp 20, d_own 10220): phi after a goal is 0, so blue gets -phi(before) and orange +phi(before).
    """
    phi_a = np.exp(-1500.0 / 1500.0) - np.exp(-8740.0 / 1500.0)
    phi_b = np.exp(-1000.0 / 1500.0) - np.exp(-9240.0 / 1500.0)
    phi_c = np.exp(-20.0 / 1500.0) - np.exp(-10220.0 / 1500.0)
    ctx = _ball_moves(
        [[0.0, 3620.0, Z], [0.0, 4120.0, Z], [0.0, 5100.0, Z]],
        [[0.0, 4120.0, Z], [0.0, 4120.0, Z], [0.0, 5300.0, Z]],
        goal_team=[-1, -1, L.BLUE],
    )
    blue = np.array([0.99 * phi_b - phi_a, 0.99 * phi_b - phi_b, -phi_c])
    orange = np.array([-0.99 * phi_b + phi_a, -0.99 * phi_b + phi_b, phi_c])
    np.testing.assert_allclose(goal_mouth_progress(ctx), np.stack([blue, orange], axis=1), rtol=1e-5)
    assert goal_mouth_progress(ctx)[0, 0] > 0.1  # 500 uu closer to the mouth pays (0.166)


def test_goal_mouth_progress_cannot_be_farmed() -> None:
    """Its discounted sum (0.99 per step) over any path of the ball that ends in a goal is -phi(start): a loop beside
    the post earns nothing, a path that wanders earns what a direct one does."""
    rng = np.random.default_rng(0)
    start = np.array([0.0, -2000.0, 300.0])
    for _ in range(3):
        path = [start] + [np.array([rng.uniform(-2500, 2500), rng.uniform(2000, 5000), 100.0]) for _ in range(40)]
        path.append(np.array([0.0, 5300.0, 300.0]))  # into the goal
        total = 0.0
        for t in range(len(path) - 1):
            scored = t == len(path) - 2
            ctx = _ball_moves([list(path[t])], [list(path[t + 1])], goal_team=[L.BLUE if scored else -1])
            total += 0.99**t * float(goal_mouth_progress(ctx)[0, 0])
        assert total == pytest.approx(-float(goal_mouth_potential(start)), abs=1e-4)
