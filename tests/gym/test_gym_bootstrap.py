"""Truncation bootstrap from the final observation (PPO), and next observations in DQN's replay buffer.

``SfCounter-v0``: observation = steps since reset, reward 0, truncated after 3 steps. With a critic
``V(s) = s``, gamma 0.5 and lambda 1, the returns of one 3-step episode are
``[0.5**2 * 3, 0.5 * 3, 3] * 0.5 = [0.375, 0.75, 1.5]``; bootstrapping from the reset observation
(0) instead would give zeros.
"""

from __future__ import annotations

import numpy as np
import torch
from gym_helpers import gym_config, register_test_envs
from torch import nn

from speedflip.gym.agents import DQNLearner, PPOLearner


def _identity_critic(learner: PPOLearner) -> None:
    critic = nn.Linear(1, 1)
    with torch.no_grad():
        critic.weight.fill_(1.0)
        critic.bias.zero_()
    learner.model.critic = nn.Sequential(critic)


def _ppo(env_id: str) -> PPOLearner:
    register_test_envs()
    cfg = gym_config(
        "cartpole-ppo", f"gym.env_id={env_id}", "gym.num_envs=1", "ppo.num_steps=3", "ppo.minibatch_size=3",
        "ppo.gamma=0.5", "ppo.gae_lambda=1.0", "ppo.normalize_obs=false", "ppo.normalize_rewards=false",
    )  # fmt: skip
    learner = PPOLearner(cfg)
    _identity_critic(learner)
    return learner


def test_truncated_episode_bootstraps_from_its_final_observation() -> None:
    learner = _ppo("SfCounter-v0")
    batch, raw = learner.collect()
    np.testing.assert_allclose(raw[:, 0, 0], [0.0, 1.0, 2.0])
    np.testing.assert_allclose(batch.values.numpy(), [0.0, 1.0, 2.0])
    np.testing.assert_allclose(batch.returns.numpy(), [0.375, 0.75, 1.5])
    assert learner.obs[0, 0] == 0.0  # the next rollout starts the new episode
    assert learner.starts.tolist() == [True]
    learner.close()


def test_terminated_episode_does_not_bootstrap() -> None:
    # terminates after 2 steps: returns 0, 0; the third step starts a new episode and bootstraps
    # from the observation after the rollout (1): 0.5 * 1
    learner = _ppo("SfCounterTerm-v0")
    batch, _ = learner.collect()
    np.testing.assert_allclose(batch.returns.numpy(), [0.0, 0.0, 0.5])
    learner.close()


def test_dqn_stores_final_observation_and_termination_only() -> None:
    register_test_envs()
    for env_id, next_obs, terminated in (
        ("SfCounter-v0", [1, 2, 3, 1], [0, 0, 0, 0]),  # truncation still bootstraps
        ("SfCounterTerm-v0", [1, 2, 1, 2], [0, 1, 0, 1]),
    ):
        cfg = gym_config("cartpole-dqn", f"gym.env_id={env_id}", "gym.num_envs=1", "dqn.learning_starts=100")
        learner = DQNLearner(cfg)
        for _ in range(4):
            learner.step()
        assert learner.replay.pos == 4 and len(learner.replay) == 4
        np.testing.assert_array_equal(learner.replay.next_obs[:4, 0], next_obs)
        np.testing.assert_array_equal(learner.replay.terminated[:4], terminated)
        learner.close()
