"""The Gymnasium and PettingZoo faces, checked with the libraries' own checkers."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env

import speedflip
from speedflip.checkpoint import CheckpointError
from speedflip.config import ConfigError, build_config
from speedflip.env.actions import ActionError
from speedflip.faces import OBS_BOUND, RocketLeagueGymEnv
from speedflip.train.trainer import Trainer


def _checked(env: Any) -> None:
    """check_env must pass without a single warning (bounded spaces, fresh arrays, determinism)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, skip_render_check=True)
    assert not [str(w.message) for w in caught if "WARN" in str(w.message)]  # gymnasium.logger.warn's prefix


@pytest.mark.parametrize("opponent", ["rule", "idle", "random"])
@pytest.mark.parametrize("action_space", ["discrete", "continuous"])
def test_gym_env_passes_check_env(opponent: str, action_space: str) -> None:
    env = speedflip.gym_env("1v1", opponent=opponent, action_space=action_space)
    try:
        assert isinstance(env, RocketLeagueGymEnv)
        assert env.observation_space.dtype == np.float32
        if action_space == "discrete":
            assert env.action_space.n == 90  # type: ignore[attr-defined]
        else:
            assert env.action_space.shape == (8,)
        _checked(env)
    finally:
        env.close()
        env.close()  # closing twice is allowed


def test_gym_env_2v2_drives_blue_car_zero_against_a_checkpoint(tmp_path: Path) -> None:
    cfg = build_config(
        {
            "env": {"num_arenas": 1, "blue_size": 2, "orange_size": 2},
            "ppo": {"num_steps": 4, "minibatch_size": 4, "policy_layers": [8], "critic_layers": [8]},
            "run": {"device": "cpu", "collector": "inprocess", "torch_threads": 1, "tensorboard": False},
        }
    )
    trainer = Trainer(cfg, run_dir=tmp_path)
    try:
        trainer.save(tmp_path / "checkpoints")
    finally:
        trainer.close()
    env = speedflip.gym_env("2v2", opponent=str(tmp_path))
    try:
        _checked(env)
        obs, _ = env.reset(seed=1)
        assert obs.shape == env.observation_space.shape
    finally:
        env.close()
    with pytest.raises(CheckpointError, match="obs size"):
        speedflip.gym_env("1v1", opponent=str(tmp_path))  # trained for 2v2


def _trajectory(env: RocketLeagueGymEnv, seed: int, steps: int = 40) -> list[Any]:
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    out: list[Any] = [obs]
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        out += [obs, reward, terminated, truncated]
        if terminated or truncated:
            obs, _ = env.reset()
    return out


@pytest.mark.parametrize("opponent", ["random", "rule"])
def test_seeded_resets_are_deterministic(opponent: str) -> None:
    env = speedflip.gym_env("1v1", opponent=opponent, env={"no_touch_timeout_seconds": 1.0})
    other = speedflip.gym_env("1v1", opponent=opponent, env={"no_touch_timeout_seconds": 1.0})
    try:
        first = _trajectory(env, 11)
        for a, b in zip(first, _trajectory(env, 11), strict=True):  # same env, after other episodes
            np.testing.assert_array_equal(a, b)
        for a, b in zip(first, _trajectory(other, 11), strict=True):  # a second instance
            np.testing.assert_array_equal(a, b)
        starts = {env.reset(seed=s)[0].tobytes() for s in range(6)}
        assert len(starts) > 1
    finally:
        env.close()
        other.close()


def test_observations_stay_in_the_box_and_episodes_end() -> None:
    env = speedflip.gym_env("quick", opponent="random", env={"no_touch_timeout_seconds": 2.0})
    try:
        env.reset(seed=0)
        env.action_space.seed(0)
        ended = 0
        for _ in range(400):
            obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
            assert obs in env.observation_space and np.isfinite(reward)
            assert np.abs(obs).max() < OBS_BOUND
            if terminated or truncated:
                ended += 1
                assert "episode" in info and info["goal_team"] in (-1, 0, 1)
                with pytest.raises(ResetNeeded):
                    env.step(env.action_space.sample())
                env.reset()
        assert ended >= 2
    finally:
        env.close()


def test_bad_actions_and_inputs_are_refused() -> None:
    env = speedflip.gym_env("1v1", opponent="idle")
    cont = speedflip.gym_env("1v1", opponent="idle", action_space="continuous")
    try:
        with pytest.raises(ResetNeeded):
            env.step(0)
        env.reset(seed=0)
        with pytest.raises(ActionError, match="out of range"):
            env.step(90)
        with pytest.raises(ActionError, match="integer"):
            env.step(1.5)
        cont.reset(seed=0)
        with pytest.raises(ActionError, match="NaN"):
            cont.step(np.full(8, np.nan, np.float32))
        with pytest.raises(ActionError, match="8 controls"):
            cont.step(np.zeros(3, np.float32))
        obs, *_ = cont.step(np.array([5, -5, 2, 0, 0, 3, 1, 0], np.float32))  # clamped, not refused
        assert obs.shape == cont.observation_space.shape
    finally:
        env.close()
        cont.close()
    with pytest.raises(ValueError, match="action_space"):
        speedflip.gym_env("1v1", action_space="multi")
    with pytest.raises(ConfigError, match="unknown preset"):
        speedflip.gym_env("no-such-preset")
    with pytest.raises(ConfigError, match="not a Rocket League config"):
        speedflip.gym_env("cartpole-ppo")
    with pytest.raises(ConfigError, match="tick_skip"):
        speedflip.gym_env("1v1", env={"tick_skip": 0})
    with pytest.raises(CheckpointError, match="neither a policy name"):
        speedflip.gym_env("1v1", opponent="no/such/run")


# ---------------------------------------------------------------------- PettingZoo
@pytest.mark.filterwarnings("ignore:The old environment creation API:DeprecationWarning")
def test_parallel_env_passes_the_pettingzoo_api_and_seed_tests() -> None:
    pytest.importorskip("pettingzoo", reason="PettingZoo is an optional extra: pip install 'speedflip[faces]'")
    from pettingzoo import ParallelEnv
    from pettingzoo.test import parallel_api_test
    from pettingzoo.test.seed_test import parallel_seed_test

    env = speedflip.parallel_env("2v2")
    assert isinstance(env, ParallelEnv)
    assert env.possible_agents == ["blue-0", "blue-1", "orange-0", "orange-1"]
    parallel_api_test(env, num_cycles=400)
    env.close()
    parallel_seed_test(lambda: speedflip.parallel_env("2v2"), num_cycles=50)
    cont = speedflip.parallel_env("1v1", action_space="continuous")
    parallel_api_test(cont, num_cycles=100)
    cont.close()
    parallel_seed_test(lambda: speedflip.parallel_env("1v1", action_space="continuous"), num_cycles=50)


def test_parallel_env_episode_end_and_bad_actions() -> None:
    pytest.importorskip("pettingzoo", reason="PettingZoo is an optional extra: pip install 'speedflip[faces]'")
    env = speedflip.parallel_env("1v1", env={"no_touch_timeout_seconds": 0.5})
    try:
        obs, infos = env.reset(seed=3)
        assert set(obs) == set(infos) == {"blue-0", "orange-0"}
        with pytest.raises(ActionError, match="missing"):
            env.step({"blue-0": 0})
        with pytest.raises(ActionError, match="out of range"):
            env.step({"blue-0": 0, "orange-0": 999})
        for _ in range(20):
            obs, _, _, truncs, infos = env.step({a: 0 for a in env.agents})
            if not env.agents:
                break
        assert not env.agents and all(truncs.values())
        with pytest.raises(ResetNeeded):
            env.step({})
        obs, _ = env.reset()
        assert env.agents == ["blue-0", "orange-0"]
    finally:
        env.close()
