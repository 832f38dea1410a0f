"""Truncation bootstrap from the final observation (PPO), next observations in DQN's transitions and replay
buffer, and DQN's training schedule over rollouts (training every ``train_frequency`` agent steps, acting
with the newest network).

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

from speedflip.algos.dqn_learner import DQNLearner
from speedflip.algos.ppo import Batch
from speedflip.algos.ppo_learner import PPOLearner
from speedflip.gym.run import GymSession
from speedflip.models.mlp import ActorCritic
from speedflip.rollout import PolicyWeights


def _identity_critic(model: nn.Module) -> None:
    assert isinstance(model, ActorCritic)
    critic = nn.Linear(1, 1)
    with torch.no_grad():
        critic.weight.fill_(1.0)
        critic.bias.zero_()
    model.critic = nn.Sequential(critic)


def _ppo(env_id: str) -> GymSession:
    register_test_envs()
    cfg = gym_config(
        "cartpole-ppo", f"gym.env_id={env_id}", "gym.num_envs=1", "ppo.num_steps=3", "ppo.minibatch_size=3",
        "ppo.gamma=0.5", "ppo.gae_lambda=1.0", "ppo.normalize_obs=false", "ppo.normalize_rewards=false",
    )  # fmt: skip
    session = GymSession(cfg)
    _identity_critic(session.learner.model)  # the learner's network and the collector's acting copy
    _identity_critic(session.collector.model)
    return session


def _batch(session: GymSession) -> tuple[Batch, np.ndarray]:
    learner = session.learner
    assert isinstance(learner, PPOLearner)
    rollout = session.collector.collect(learner.policy_weights())
    batch = learner.prepare(rollout)
    assert isinstance(batch, Batch)
    return batch, rollout.raw_obs


def test_truncated_episode_bootstraps_from_its_final_observation() -> None:
    session = _ppo("SfCounter-v0")
    batch, raw = _batch(session)
    np.testing.assert_allclose(raw[:, 0, 0], [0.0, 1.0, 2.0])
    np.testing.assert_allclose(batch.values.numpy(), [0.0, 1.0, 2.0])
    np.testing.assert_allclose(batch.returns.numpy(), [0.375, 0.75, 1.5])
    assert session.collector.obs[0, 0] == 0.0  # the next rollout starts the new episode
    assert session.collector.starts.tolist() == [True]
    session.close()


def test_terminated_episode_does_not_bootstrap() -> None:
    # terminates after 2 steps: returns 0, 0; the third step starts a new episode and bootstraps
    # from the observation after the rollout (1): 0.5 * 1
    session = _ppo("SfCounterTerm-v0")
    batch, _ = _batch(session)
    np.testing.assert_allclose(batch.returns.numpy(), [0.0, 0.0, 0.5])
    session.close()


def test_dqn_stores_final_observation_and_termination_only() -> None:
    register_test_envs()
    for env_id, next_obs, terminated in (
        ("SfCounter-v0", [1, 2, 3, 1], [0, 0, 0, 0]),  # truncation still bootstraps
        ("SfCounterTerm-v0", [1, 2, 1, 2], [0, 1, 0, 1]),
    ):
        cfg = gym_config("cartpole-dqn", f"gym.env_id={env_id}", "gym.num_envs=1", "dqn.learning_starts=100")
        session = GymSession(cfg)
        learner = session.learner
        assert isinstance(learner, DQNLearner)
        rollout = session.collector.collect(learner.policy_weights(), 0, num_steps=4)
        assert rollout.next_obs is not None
        np.testing.assert_array_equal(rollout.next_obs[:, 0, 0], next_obs)
        learner.update(rollout)
        assert learner.replay.pos == 4 and len(learner.replay) == 4 and learner.global_step == 4
        np.testing.assert_array_equal(learner.replay.next_obs[:4, 0], next_obs)
        np.testing.assert_array_equal(learner.replay.terminated[:4], terminated)
        session.close()


def _reference_schedule(env_steps: int, num_envs: int, learning_starts: int, frequency: int) -> list[int]:
    """The training rounds done before each env step, counting agent steps one env step at a time."""
    acting, step, since, rounds = [], 0, 0, 0
    for _ in range(env_steps):
        acting.append(rounds)
        step += num_envs
        if step <= learning_starts:
            continue
        since += num_envs
        while since >= frequency:
            since -= frequency
            rounds += 1
    return acting


def test_dqn_trains_every_train_frequency_agent_steps_with_the_newest_network() -> None:
    cfg = gym_config(
        "cartpole-dqn", "gym.num_envs=4", "dqn.learning_starts=6", "dqn.train_frequency=10", "dqn.gradient_steps=1",
        "dqn.batch_size=4", "gym.log_interval_steps=50", "run.total_steps=200",
    )  # fmt: skip
    session = GymSession(cfg)
    seen: list[tuple[int, int]] = []  # (steps, version of the weights that acted) of every rollout
    collect = session.collector.collect

    def spy(weights: PolicyWeights, global_step: int = 0, num_steps: int | None = None):  # type: ignore[no-untyped-def]
        rollout = collect(weights, global_step, num_steps)
        seen.append((rollout.num_steps, weights.version))
        return rollout

    session.collector.collect = spy  # type: ignore[method-assign]
    try:
        while session.global_step < cfg.run.total_steps:
            session.iterate()
    finally:
        session.close()
    acting = [version for steps, version in seen for _ in range(steps)]
    assert acting == _reference_schedule(50, 4, 6, 10)  # a version = one gradient step = one round here
    assert session.global_step == 200 and session.iteration == 4
