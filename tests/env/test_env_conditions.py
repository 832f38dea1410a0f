"""Done conditions: a goal terminates, time limits truncate, ended arenas are reset at once."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import RocketSim as rsim

from speedflip.env import conditions
from speedflip.env import layout as L
from speedflip.env.obs import POS_COEF
from speedflip.env.vec_env import RocketLeagueVecEnv


def test_goal_scored_pure() -> None:
    """goal_team -1 means no goal; 0 (blue) or 1 (orange) is a goal."""
    np.testing.assert_array_equal(conditions.goal_scored(np.array([-1, 0, 1, -1])), [False, True, True, False])


def test_timeout_pure() -> None:
    """The limit is reached when the tick count is at or past it."""
    got = conditions.timeout(np.array([0, 23, 24, 25, 400]), 24)
    np.testing.assert_array_equal(got, [False, False, True, True, True])


def test_no_touch_timeout_pure() -> None:
    got = conditions.no_touch_timeout(np.array([0, 3599, 3600, 3601]), 3600)
    np.testing.assert_array_equal(got, [False, False, True, True])


def _drive(env: RocketLeagueVecEnv, ground_row: Callable[..., int]) -> np.ndarray:
    return np.full(env.num_agents, ground_row(1.0, 1.0, boost=1.0))


def test_timeout_truncates_and_resets(
    make_env: Callable[..., RocketLeagueVecEnv], ground_row: Callable[..., int]
) -> None:
    """0.2 s episodes at tick_skip 8 end after ceil(0.2 * 120 / 8) = 3 steps, truncated not terminated.

    The returned obs is the new episode's first observation; final_obs is the last one of the old
    episode (the cars had driven away from the kickoff), so they differ.
    """
    env = make_env(
        num_arenas=2,
        blue_size=1,
        orange_size=1,
        timeout_seconds=0.2,
        state_setters={"kickoff": 1.0},
        rewards={"touch": 1.0},
    )
    env.reset()
    steps_per_episode = math.ceil(0.2 * 120 / 8)
    assert steps_per_episode == 3
    actions = _drive(env, ground_row)
    for episode in range(2):
        for _ in range(steps_per_episode - 1):
            res = env.step(actions)
            assert not res.truncated.any() and not res.terminated.any()
            assert res.episodes == []
        res = env.step(actions)
        assert res.truncated.all(), f"episode {episode} truncated at step {steps_per_episode}"
        assert not res.terminated.any()
        assert len(res.episodes) == 2
        for ep in res.episodes:
            assert ep["length_seconds"] == 0.2
            assert ep["goal"] == 0.0
        assert not np.allclose(res.final_obs, res.obs)
        # the reset observation: cars at rest at kickoff, no previous controls
        np.testing.assert_array_equal(res.obs[:, -8:], 0.0)
        np.testing.assert_array_equal(res.final_obs[:, -8:], env.actions.table[actions])
        # the car drove in its last episode: its own-view position changed compared to the new kickoff
        assert np.all(np.abs(res.final_obs[:, 9:11] - res.obs[:, 9:11]).max(axis=1) * (1 / POS_COEF) > 10)
        np.testing.assert_array_equal(env.episode_ticks, 0)


def test_no_touch_timeout_truncates(
    make_env: Callable[..., RocketLeagueVecEnv], ground_row: Callable[..., int]
) -> None:
    """Without a touch for 0.2 s the episode is truncated after 3 steps, even with a long time limit."""
    env = make_env(
        num_arenas=1,
        blue_size=1,
        orange_size=1,
        timeout_seconds=300.0,
        no_touch_timeout_seconds=0.2,
        state_setters={"kickoff": 1.0},
    )
    env.reset()
    idle = np.full(env.num_agents, ground_row(0.0, 0.0))
    done_at = [i for i in range(1, 7) if env.step(idle).truncated.all()]
    assert done_at == [3, 6]


def test_goal_terminates_with_goal_reward(make_env: Callable[..., RocketLeagueVecEnv]) -> None:
    """A ball sent into the orange goal: arena 0 terminates (not truncated), blue +1, orange -1.

    Arena 1 plays on untouched. The ended arena is reset to a kickoff.
    """
    env = make_env(
        num_arenas=2,
        blue_size=1,
        orange_size=1,
        state_setters={"kickoff": 1.0},
        rewards={"goal": 1.0},
    )
    env.reset()
    ball = rsim.BallState()
    ball.pos = rsim.Vec(0.0, 5000.0, 300.0)
    ball.vel = rsim.Vec(0.0, 2000.0, 0.0)
    env.arenas.arenas[0].ball.set_state(ball)
    idle = np.zeros(env.num_agents, np.int64)
    for _ in range(5):
        res = env.step(idle)
        if res.terminated.any():
            break
    else:
        raise AssertionError("no goal within 5 steps")
    np.testing.assert_array_equal(res.terminated, [True, True, False, False])
    assert not res.truncated.any()
    np.testing.assert_array_equal(res.rewards, [1.0, -1.0, 0.0, 0.0])
    assert env.total_goals == 1
    assert [ep["goal"] for ep in res.episodes] == [1.0]
    # final obs (blue's view): the ball is past the goal line; the new episode starts at a kickoff
    assert res.final_obs[0, 1] / POS_COEF > L.BACK_WALL_Y
    assert res.final_obs[1, 1] / POS_COEF < -L.BACK_WALL_Y  # orange sees it in its own goal
    np.testing.assert_allclose(res.obs[0, 0:3] / POS_COEF, [0.0, 0.0, L.BALL_REST_Z], atol=1e-2)
    # the next step scores nothing: the goal was counted once
    res = env.step(idle)
    assert not res.terminated.any()
    np.testing.assert_array_equal(res.rewards, 0.0)


def test_goal_for_orange(make_env: Callable[..., RocketLeagueVecEnv]) -> None:
    """A ball into the blue goal (y < -5120) gives orange +1 and blue -1."""
    env = make_env(num_arenas=1, blue_size=1, orange_size=1, state_setters={"kickoff": 1.0}, rewards={"goal": 1.0})
    env.reset()
    ball = rsim.BallState()
    ball.pos = rsim.Vec(0.0, -5000.0, 300.0)
    ball.vel = rsim.Vec(0.0, -2000.0, 0.0)
    env.arenas.arenas[0].ball.set_state(ball)
    rewards = [env.step(np.zeros(2, np.int64)).rewards for _ in range(5)]
    assert sum(r.tolist() == [-1.0, 1.0] for r in rewards) == 1
