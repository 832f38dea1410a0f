"""Every shipped Gymnasium preset builds its session (learner + collector) and trains one small iteration."""

from __future__ import annotations

import importlib.util

import pytest
from gym_helpers import gym_config

from speedflip.gym.run import GymSession

GYM_PRESETS = {
    "cartpole-ppo": "CartPole-v1",
    "cartpole-dqn": "CartPole-v1",
    "acrobot-ppo": "Acrobot-v1",
    "acrobot-dqn": "Acrobot-v1",
    "lunarlander-ppo": "LunarLander-v3",
}


@pytest.mark.parametrize("preset", sorted(GYM_PRESETS))
def test_gym_preset_trains_one_iteration(preset: str) -> None:
    if preset.startswith("lunarlander") and importlib.util.find_spec("Box2D") is None:
        pytest.skip("Box2D is not installed (pip install 'speedflip[box2d]')")
    small = [
        "ppo.num_steps=16", "ppo.minibatch_size=16", "gym.num_envs=2", "gym.log_interval_steps=64",
        "dqn.learning_starts=8", "dqn.train_frequency=8", "dqn.gradient_steps=1", "run.total_steps=64",
    ]  # fmt: skip
    cfg = gym_config(preset, *small)
    assert cfg.gym.env_id == GYM_PRESETS[preset]
    learner = GymSession(cfg)
    try:
        record = learner.iterate()
        assert record["global_step"] > 0
    finally:
        learner.close()
