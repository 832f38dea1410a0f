"""Own goals in rated matches: the last touch decides, counted per side on real RocketSim; where each one
came from (:class:`~speedflip.selfplay.match.OwnGoal`, in the conceding team's frame)."""

from __future__ import annotations

import numpy as np
import pytest
import RocketSim as rsim

from speedflip.env import layout as L
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.selfplay.match import OwnGoal, last_touch_team, match_env_config, play_match, summarize
from speedflip.selfplay.policies import resolve_policy

BLUE_ORANGE = np.array([True, False])  # car 0 blue, car 1 orange


def test_last_touch_team_by_hand() -> None:
    last_touch = np.array(
        [
            [False, False],  # nobody since the kickoff
            [False, True],  # orange's car
            [True, False],  # blue's car
            [True, True],  # both in one step: nobody's
        ]
    )
    assert last_touch_team(last_touch, BLUE_ORANGE).tolist() == [-1, L.ORANGE, L.BLUE, -1]
    two_a_side = np.array([True, True, False, False])  # cars 0 and 1 blue
    both_blue = np.array([[True, True, False, False], [False, True, True, False]])
    assert last_touch_team(both_blue, two_a_side).tolist() == [L.BLUE, -1]


def _own_goal_setup(arena: rsim.Arena, cars: list[rsim.Car], rng: np.random.Generator) -> None:
    """Blue's car rolls at 1500 uu/s towards its own goal with the ball at rest in front of it."""
    arena.reset_kickoff(seed=int(rng.integers(0, 2**31 - 1)))
    ball = rsim.BallState()
    ball.pos = rsim.Vec(0.0, -4700.0, L.BALL_REST_Z)
    arena.ball.set_state(ball)
    for car in cars:
        state = car.get_state()
        blue = car.team == rsim.Team.BLUE
        y, yaw = (-4300.0, -np.pi / 2) if blue else (4600.0, -np.pi / 2)
        state.pos = rsim.Vec(0.0, y, L.CAR_REST_Z)
        state.rot_mat = rsim.Angle(yaw, 0.0, 0.0).as_rot_mat()
        state.vel = rsim.Vec(0.0, -1500.0 if blue else 0.0, 0.0)
        state.ang_vel = rsim.Vec(0.0, 0.0, 0.0)
        car.set_state(state)


def test_a_car_pushing_the_ball_into_its_own_goal_scores_an_own_goal() -> None:
    env = RocketLeagueVecEnv(match_env_config(2, 1, 4.0), seed=0)
    try:
        env.setters["kickoff"] = _own_goal_setup  # every reset (also after a goal) repeats the situation
        idle = resolve_policy("idle", env.obs_dim, env.actions.table)
        log: list[OwnGoal] = []
        results = play_match(env, idle, idle, game_seconds=4.0, own_goal_log=log)
    finally:
        env.close()
    a_blue, a_orange = results
    assert a_blue.a_is_blue and not a_orange.a_is_blue
    # game 0: A drives blue and concedes only own goals; game 1: B is blue and does
    assert a_blue.goals_b >= 1 and a_blue.goals_a == 0
    assert a_blue.own_goals_a == a_blue.goals_b and a_blue.own_goals_b == 0
    assert a_orange.goals_a >= 1 and a_orange.goals_b == 0
    assert a_orange.own_goals_b == a_orange.goals_a and a_orange.own_goals_a == 0
    assert a_blue.touches_a >= a_blue.goals_b  # the touch of the scoring step is counted too
    s = summarize(results)
    assert (s.own_goals_a, s.own_goals_b) == (a_blue.own_goals_a, a_orange.own_goals_b)
    # one record per own goal: game 0's conceded by A (blue), game 1's by B (blue); blue's frame is the
    # world's. The car came at the ball from upfield: 400 uu from -4300 to the ball at -4700 at 1500 uu/s
    # (about 0.2 s after the kickoff, 1/15 s per step), the ball in the net soon after.
    assert [g.game for g in log if g.game == 0] == [0] * a_blue.own_goals_a
    assert [g.game for g in log if g.game == 1] == [1] * a_orange.own_goals_b
    for g in log:
        assert g.conceded_by_a == (g.game == 0)
        assert g.car_upfield and -4700.0 - 1.0 <= g.ball_y < g.car_y <= -4300.0 + 1.0
        assert abs(g.ball_x) < 1.0 and abs(g.car_x) < 1.0
        assert 0.0 < g.touch_seconds <= 0.5 and g.touch_seconds <= g.goal_seconds < 2.0
        assert g.as_dict()["car_upfield"] is True


def _orange_own_goal_setup(arena: rsim.Arena, cars: list[rsim.Car], rng: np.random.Generator) -> None:
    """Orange's car rolls at 1500 uu/s towards its own goal (+y) with the ball at rest in front of it,
    300 uu to the right of the centre line (+x); blue waits at its own goal."""
    arena.reset_kickoff(seed=int(rng.integers(0, 2**31 - 1)))
    ball = rsim.BallState()
    ball.pos = rsim.Vec(300.0, 4700.0, L.BALL_REST_Z)
    arena.ball.set_state(ball)
    for car in cars:
        state = car.get_state()
        orange = car.team == rsim.Team.ORANGE
        x, y = (300.0, 4300.0) if orange else (0.0, -4600.0)
        state.pos = rsim.Vec(x, y, L.CAR_REST_Z)
        state.rot_mat = rsim.Angle(np.pi / 2, 0.0, 0.0).as_rot_mat()
        state.vel = rsim.Vec(0.0, 1500.0 if orange else 0.0, 0.0)
        state.ang_vel = rsim.Vec(0.0, 0.0, 0.0)
        car.set_state(state)


def test_an_orange_own_goal_is_recorded_in_orange_s_frame() -> None:
    """Orange's frame is the world turned 180 degrees about z: its own goal at -y, the ball at x = -300."""
    env = RocketLeagueVecEnv(match_env_config(2, 1, 3.0), seed=0)
    try:
        env.setters["kickoff"] = _orange_own_goal_setup
        idle = resolve_policy("idle", env.obs_dim, env.actions.table)
        log: list[OwnGoal] = []
        results = play_match(env, idle, idle, game_seconds=3.0, own_goal_log=log)
    finally:
        env.close()
    assert results[0].own_goals_b >= 1 and results[1].own_goals_a >= 1
    assert len(log) == results[0].own_goals_b + results[1].own_goals_a
    for g in log:
        assert g.conceded_by_a == (g.game == 1)  # game 1 puts A on orange
        assert g.ball_x == pytest.approx(-300.0, abs=1.0) and g.car_x == pytest.approx(-300.0, abs=1.0)
        assert g.car_upfield and -4700.0 - 1.0 <= g.ball_y < g.car_y <= -4300.0 + 1.0


def test_no_log_no_records_and_the_same_results() -> None:
    """The log is optional and observing changes nothing: the same games with and without it."""
    outcomes = []
    for log in (None, []):
        env = RocketLeagueVecEnv(match_env_config(2, 1, 3.0), seed=0)
        try:
            env.setters["kickoff"] = _own_goal_setup
            idle = resolve_policy("idle", env.obs_dim, env.actions.table)
            outcomes.append(play_match(env, idle, idle, game_seconds=3.0, own_goal_log=log))
        finally:
            env.close()
    assert outcomes[0] == outcomes[1]


def test_a_shot_is_not_an_own_goal() -> None:
    """The rule bot scores on the idle car by its own shots: it concedes no own goal, and most of its goals
    are its own touches, not the idle side's."""
    env = RocketLeagueVecEnv(match_env_config(4, 1, 30.0), seed=0)
    try:
        rule = resolve_policy("rule", env.obs_dim, env.actions.table)
        idle = resolve_policy("idle", env.obs_dim, env.actions.table)
        results = play_match(env, rule, idle, game_seconds=30.0)
    finally:
        env.close()
    s = summarize(results)
    assert s.goals_a >= 2 and s.goals_b == 0
    assert s.own_goals_a == 0
    # a ball that glances off the idle car on its way in counts as the idle side's own goal; most are shots
    assert s.own_goals_b < s.goals_a / 2
