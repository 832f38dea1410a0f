"""Kickoff seats are assigned by speedflip, so orange car i mirrors blue car i exactly."""

from __future__ import annotations

import numpy as np
import pytest

from speedflip.config import EnvConfig
from speedflip.env.vec_env import RocketLeagueVecEnv


@pytest.mark.parametrize("team_size", [2, 3])
def test_orange_car_i_mirrors_blue_car_i(team_size: int) -> None:
    """Row-for-row equal observations for blue car i and orange car i in every arena."""
    cfg = EnvConfig(num_arenas=16, blue_size=team_size, orange_size=team_size, state_setters={"kickoff": 1.0})
    env = RocketLeagueVecEnv(cfg, seed=3)
    obs = env.reset().reshape(16, 2 * team_size, -1)
    np.testing.assert_allclose(obs[:, :team_size], obs[:, team_size:], atol=1e-5)
    env.close()


def test_kickoff_seats_reproducible() -> None:
    """The same seed gives the same seats (two separate envs)."""
    cfg = EnvConfig(num_arenas=8, blue_size=3, orange_size=3, state_setters={"kickoff": 1.0})
    a, b = RocketLeagueVecEnv(cfg, seed=11), RocketLeagueVecEnv(cfg, seed=11)
    np.testing.assert_array_equal(a.reset(), b.reset())
    a.close()
    b.close()
