"""NaN from physics: the arena is reset, the event counted, and nothing non-finite leaves the env."""

from __future__ import annotations

import numpy as np
import RocketSim as rsim

from speedflip.config import EnvConfig
from speedflip.env.vec_env import RocketLeagueVecEnv


def test_nan_ball_resets_only_that_arena_and_is_counted() -> None:
    env = RocketLeagueVecEnv(EnvConfig(num_arenas=3, rewards={"touch": 1.0, "face_ball": 1.0}), seed=0)
    env.reset()
    ball = rsim.BallState()
    ball.pos = rsim.Vec(float("nan"), 0.0, 500.0)
    env.arenas.arenas[1].ball.set_state(ball)
    result = env.step(np.zeros(env.num_agents, np.int64))
    assert env.total_nan_resets == 1
    # arena 1 ended as terminal (no bootstrap from a broken state); the others go on
    np.testing.assert_array_equal(result.terminated.reshape(3, 2)[:, 0], [False, True, False])
    for array in (result.obs, result.final_obs, result.rewards):
        assert np.isfinite(array).all()
    assert np.all(result.rewards.reshape(3, 2)[1] == 0.0)
    for _ in range(10):  # the arena was really reset: physics runs on without new NaN
        result = env.step(np.zeros(env.num_agents, np.int64))
    assert env.total_nan_resets == 1
    assert np.isfinite(env.state.ball).all() and np.isfinite(result.obs).all()
    env.close()
