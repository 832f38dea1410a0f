"""Shared fixtures for the environment tests (real RocketSim, small and cheap)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from speedflip.config import EnvConfig
from speedflip.env.actions import LookupTableAction
from speedflip.env.sim import init_rocketsim
from speedflip.env.vec_env import RocketLeagueVecEnv


@pytest.fixture(scope="session", autouse=True)
def _rocketsim() -> None:
    """Load the collision meshes once for the whole session."""
    init_rocketsim()


@pytest.fixture(scope="session")
def lookup() -> LookupTableAction:
    return LookupTableAction()


@pytest.fixture(scope="session")
def ground_row(lookup: LookupTableAction) -> Callable[..., int]:
    """``ground_row(throttle, steer, boost=0, handbrake=0)`` -> index of that ground row in the table."""

    def find(throttle: float, steer: float, boost: float = 0.0, handbrake: float = 0.0) -> int:
        want = np.array([throttle, steer, 0.0, steer, 0.0, 0.0, boost, handbrake], np.float32)
        hits = np.flatnonzero(np.all(lookup.table == want, axis=1))
        assert hits.size == 1, f"expected exactly one table row {want.tolist()}, found {hits.size}"
        return int(hits[0])

    return find


@pytest.fixture
def make_env() -> Iterator[Callable[..., RocketLeagueVecEnv]]:
    """Factory ``make_env(seed=0, num_threads=1, **EnvConfig fields)``; closes every env it built."""
    built: list[RocketLeagueVecEnv] = []

    def make(seed: int = 0, num_threads: int = 1, **fields: Any) -> RocketLeagueVecEnv:
        env = RocketLeagueVecEnv(EnvConfig(**fields), seed=seed, num_threads=num_threads)
        built.append(env)
        return env

    yield make
    for env in built:
        env.close()
