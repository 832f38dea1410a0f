"""Sticky buttons: a pressed jump stays held for `sticky_buttons_steps` steps, then releases."""

from __future__ import annotations

import numpy as np

from speedflip.config import EnvConfig
from speedflip.env.vec_env import RocketLeagueVecEnv


def _row(env: RocketLeagueVecEnv, controls: list[float]) -> int:
    return int(np.flatnonzero(np.all(env.actions.table == np.array(controls, np.float32), axis=1))[0])


def test_jump_is_held_for_the_sticky_steps_then_released() -> None:
    env = RocketLeagueVecEnv(EnvConfig(num_arenas=2, orange_size=0, sticky_buttons_steps=3), seed=0)
    env.reset()
    jump, neutral = _row(env, [0, 0, 0, 0, 0, 1, 0, 0]), _row(env, [0] * 8)
    held = []
    for step in range(5):
        action = np.full(env.num_agents, jump if step == 0 else neutral, np.int64)
        env.step(action)
        held.append(bool(env.arenas.cars[0][0].get_controls().jump))
    # pressed at step 0, held through steps 1 and 2 (3 steps in all), released from step 3
    assert held == [True, True, True, False, False]
    env.close()


def test_off_by_default_keeps_table_rows() -> None:
    env = RocketLeagueVecEnv(EnvConfig(num_arenas=1, orange_size=0), seed=0)
    env.reset()
    env.step(np.array([_row(env, [0, 0, 0, 0, 0, 1, 0, 0])]))
    env.step(np.array([_row(env, [0] * 8)]))
    assert not env.arenas.cars[0][0].get_controls().jump
    env.close()
