"""Gymnasium env plumbing: --env parsing, id checks, space checks, observation encoding, final observations."""

from __future__ import annotations

import numpy as np
import pytest
from gym_helpers import register_test_envs
from gymnasium import spaces

from speedflip.gym.cli import parse_env_arg
from speedflip.gym.envs import (
    GymEnvError,
    SpaceInfo,
    check_env_id,
    encode_obs,
    final_observations,
    make_gym_vec_env,
    space_info,
)


def test_parse_env_arg() -> None:
    assert parse_env_arg("gym:CartPole-v1") == "CartPole-v1"
    assert parse_env_arg("gym:my_mod:MyEnv-v0") == "my_mod:MyEnv-v0"
    assert parse_env_arg("rocketleague") is None
    with pytest.raises(GymEnvError, match="gym:<id>"):
        parse_env_arg("CartPole-v1")
    with pytest.raises(GymEnvError):
        parse_env_arg("gym:")


def test_unknown_id_names_it_suggests_and_says_how_to_list() -> None:
    with pytest.raises(GymEnvError) as info:
        check_env_id("CartPol-v1")
    message = str(info.value)
    assert "'CartPol-v1'" in message
    assert "CartPole-v1" in message  # the suggestion
    assert "pprint_registry" in message  # how to list the ids


def test_module_prefix_is_imported_and_reported() -> None:
    assert check_env_id("gymnasium.envs.classic_control:CartPole-v1") == "CartPole-v1"
    with pytest.raises(GymEnvError, match="cannot import module 'no_such_module_xyz'"):
        check_env_id("no_such_module_xyz:Foo-v0")


def test_continuous_actions_are_refused_with_the_algo_named() -> None:
    box = spaces.Box(-1.0, 1.0, (3,), np.float32)
    with pytest.raises(GymEnvError) as info:
        space_info(box, spaces.Box(-2.0, 2.0, (1,), np.float32), "Pendulum-v1", "dqn")
    assert "--algo dqn needs a discrete action space" in str(info.value)
    assert "Pendulum-v1" in str(info.value)
    with pytest.raises(GymEnvError, match="Dict observation space"):
        space_info(spaces.Dict({"a": box}), spaces.Discrete(2), "X-v0", "ppo")


def test_space_info_and_encoding() -> None:
    box = space_info(spaces.Box(0.0, 1.0, (2, 3), np.float32), spaces.Discrete(4), "X", "ppo")
    assert box == SpaceInfo(obs_dim=6, num_actions=4, obs_kind="box")
    assert encode_obs(np.ones((5, 2, 3)), box).shape == (5, 6)
    disc = space_info(spaces.Discrete(3), spaces.Discrete(2), "X", "dqn")
    one_hot = encode_obs(np.array([2, 0]), disc)
    np.testing.assert_array_equal(one_hot, [[0, 0, 1], [1, 0, 0]])
    assert one_hot.dtype == np.float32


def test_final_observation_is_the_last_one_not_the_reset_one() -> None:
    register_test_envs()
    env = make_gym_vec_env("SfCounter-v0", 2)
    try:
        obs, _ = env.reset(seed=0)
        for expected in (1.0, 2.0):
            obs, _, terminated, truncated, info = env.step(np.array([0, 0]))
            assert obs[:, 0].tolist() == [expected, expected]
        obs, _, terminated, truncated, info = env.step(np.array([0, 0]))
        assert truncated.all() and not terminated.any()
        assert obs[:, 0].tolist() == [0.0, 0.0]  # same-step autoreset: already the next episode
        final = final_observations(obs, info, terminated | truncated)
        assert final[:, 0].tolist() == [3.0, 3.0]
        assert obs[:, 0].tolist() == [0.0, 0.0]  # not modified in place
    finally:
        env.close()


def test_set_activation_swaps_every_relu() -> None:
    import torch
    from torch import nn

    from speedflip.models.activation import set_activation
    from speedflip.models.mlp import ActorCritic

    model = ActorCritic(4, 2, [8, 8], [8])
    x = torch.randn(3, 4)
    before = model.value(x)
    set_activation(model, "tanh")
    kinds = [type(m) for m in model.modules() if isinstance(m, (nn.ReLU, nn.Tanh))]
    assert kinds == [nn.Tanh] * 3
    expected = model.critic[2](torch.tanh(model.critic[0](x))).squeeze(-1)
    torch.testing.assert_close(model.value(x), expected)
    assert not torch.allclose(before, expected)
