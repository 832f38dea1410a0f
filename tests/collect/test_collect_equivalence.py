"""The multi-process collector returns exactly what the in-process env returns for the same seed and actions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from speedflip.collect.multiprocess import CollectorError, MultiProcessVecEnv
from speedflip.config import EnvConfig
from speedflip.env.vec_env import RocketLeagueVecEnv, StepResult

FIELDS = ("obs", "rewards", "terminated", "truncated", "final_obs")


def short_episodes(**overrides: Any) -> EnvConfig:
    """Episodes of a second or two so that goals/time limits and both state setters' resets happen often."""
    data: dict[str, Any] = {
        "num_arenas": 5,
        "timeout_seconds": 2.0,
        "no_touch_timeout_seconds": 1.0,
        "state_setters": {"kickoff": 0.5, "random": 0.5},
    }
    data.update(overrides)
    return EnvConfig(**data)


def assert_same(a: StepResult, b: StepResult, step: int) -> None:
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape, f"step {step}: {name} differs in dtype/shape"
        assert np.array_equal(x, y), f"step {step}: {name} differs"
    assert a.episodes == b.episodes, f"step {step}: finished-episode stats differ"
    assert a.goal_team is not None and b.goal_team is not None
    assert np.array_equal(a.goal_team, b.goal_team), f"step {step}: goal_team differs"


def run_both(cfg: EnvConfig, seed: int, steps: int, workers: int, start_method: str) -> int:
    """Step both backends with the same random actions; returns the number of finished episodes."""
    inproc = RocketLeagueVecEnv(cfg, seed=seed, num_threads=2)
    multi = MultiProcessVecEnv(cfg, seed=seed, num_workers=workers, start_method=start_method, timeout=30.0)
    try:
        assert (multi.num_agents, multi.obs_dim, multi.num_actions) == (
            inproc.num_agents,
            inproc.obs_dim,
            inproc.num_actions,
        )
        assert np.array_equal(inproc.reset(), multi.reset())
        rng = np.random.default_rng(seed + 100)
        episodes = 0
        for t in range(steps):
            actions = rng.integers(0, inproc.num_actions, inproc.num_agents)
            a, b = inproc.step(actions), multi.step(actions)
            assert_same(a, b, t)
            episodes += len(a.episodes)
        assert (inproc.total_touches, inproc.total_goals) == (multi.total_touches, multi.total_goals)
        assert inproc.total_agent_seconds == pytest.approx(multi.total_agent_seconds)
        means_a, means_b = inproc.reward_means(), multi.reward_means()
        assert means_a.keys() == means_b.keys()
        for name in means_a:
            assert means_a[name] == pytest.approx(means_b[name], rel=1e-5, abs=1e-6)
        assert inproc.get_rng_state() == multi.get_rng_state()
        return episodes
    finally:
        inproc.close()
        multi.close()


@pytest.mark.parametrize(
    ("seed", "workers", "start_method"),
    [(0, 2, "forkserver"), (11, 3, "spawn")],
)
def test_same_trajectories_1v1(seed: int, workers: int, start_method: str) -> None:
    # 5 arenas over 2 or 3 workers: uneven slices, so arena offsets matter
    episodes = run_both(short_episodes(), seed=seed, steps=120, workers=workers, start_method=start_method)
    assert episodes > 10, "the test should cover many resets"


def test_same_trajectories_with_a_custom_action_table() -> None:
    """A table from bins (81 rows, not the default 90): both backends act with it, step for step.

    This is the run of the bug report (steer and torque bins [-1, 0, 1], multiprocess collector): the
    parent used to check actions against the default table while the workers used the run's table.
    """
    cfg = short_episodes(num_arenas=4, action_table={"steer": [-1, 0, 1], "torque": [-1, 0, 1]})
    inproc = RocketLeagueVecEnv(cfg, seed=2, num_threads=1)
    multi = MultiProcessVecEnv(cfg, seed=2, num_workers=2, timeout=30.0)
    try:
        assert inproc.num_actions == multi.num_actions == 81
        np.testing.assert_array_equal(inproc.actions.table, multi.actions.table)
        np.testing.assert_array_equal(inproc.reset(), multi.reset())
        top = np.full(inproc.num_agents, inproc.num_actions - 1)
        assert_same(inproc.step(top), multi.step(top), -1)  # the highest valid index works in both
        rng = np.random.default_rng(3)
        resets = 0
        for t in range(50):
            actions = rng.integers(0, inproc.num_actions, inproc.num_agents)
            a, b = inproc.step(actions), multi.step(actions)
            for name in FIELDS:
                np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=f"step {t}: {name}")
            assert_same(a, b, t)
            resets += int((a.terminated | a.truncated).any())
        assert resets >= 1, "the test should cover at least one reset"
        assert multi.worker_restarts == 0
    finally:
        inproc.close()
        multi.close()


def test_same_trajectories_2v2() -> None:
    cfg = short_episodes(num_arenas=3, blue_size=2, orange_size=2)
    assert run_both(cfg, seed=5, steps=80, workers=2, start_method="forkserver") > 3


def test_rng_state_moves_between_backends() -> None:
    """A checkpoint's RNG state taken from one backend resumes identically in the other."""
    cfg = short_episodes(num_arenas=4)
    source = RocketLeagueVecEnv(cfg, seed=1)
    rng = np.random.default_rng(0)
    source.reset()
    for _ in range(40):
        source.step(rng.integers(0, source.num_actions, source.num_agents))
    state = source.get_rng_state()
    inproc = RocketLeagueVecEnv(cfg, seed=99)
    multi = MultiProcessVecEnv(cfg, seed=98, num_workers=2)
    try:
        inproc.set_rng_state(state)
        multi.set_rng_state(state)
        assert multi.get_rng_state() == state
        assert np.array_equal(inproc.reset(), multi.reset())
        for t in range(30):
            actions = rng.integers(0, inproc.num_actions, inproc.num_agents)
            assert_same(inproc.step(actions), multi.step(actions), t)
    finally:
        source.close()
        inproc.close()
        multi.close()


def test_legacy_single_stream_state_is_accepted() -> None:
    """Checkpoints written before per-arena streams held one numpy bit-generator state."""
    legacy = np.random.default_rng(3).bit_generator.state
    a = RocketLeagueVecEnv(short_episodes(num_arenas=2), seed=0)
    b = RocketLeagueVecEnv(short_episodes(num_arenas=2), seed=50)
    try:
        a.set_rng_state(legacy)
        b.set_rng_state(legacy)
        assert a.get_rng_state() == b.get_rng_state()
        with pytest.raises(ValueError, match="unknown RNG state format"):
            a.set_rng_state({"format": "something-else"})
    finally:
        a.close()
        b.close()


def test_worker_slice_uses_the_global_arena_streams() -> None:
    """An env over arenas [2, 4) of a pool draws the same resets as arenas 2 and 3 of the whole pool."""
    whole = RocketLeagueVecEnv(short_episodes(num_arenas=4), seed=9)
    part = RocketLeagueVecEnv(short_episodes(num_arenas=2), seed=9, arena_offset=2)
    try:
        obs_whole, obs_part = whole.reset(), part.reset()
        cars = whole.num_cars
        assert np.array_equal(obs_whole[2 * cars :], obs_part)
    finally:
        whole.close()
        part.close()


def test_step_async_then_wait_is_step() -> None:
    cfg = short_episodes(num_arenas=2)
    a = MultiProcessVecEnv(cfg, seed=2, num_workers=1)
    b = MultiProcessVecEnv(cfg, seed=2, num_workers=2)
    try:
        assert np.array_equal(a.reset(), b.reset())
        rng = np.random.default_rng(1)
        for t in range(20):
            actions = rng.integers(0, a.num_actions, a.num_agents)
            a.step_async(actions)
            assert_same(a.step_wait(), b.step(actions), t)
        a.step_async(np.zeros(a.num_agents, np.int64))
        with pytest.raises(CollectorError, match="step_async called twice"):
            a.step_async(np.zeros(a.num_agents, np.int64))
        with pytest.raises(CollectorError, match="pending"):
            a.get_rng_state()
        a.step_wait()
        with pytest.raises(CollectorError, match="without step_async"):
            a.step_wait()
    finally:
        a.close()
        b.close()
