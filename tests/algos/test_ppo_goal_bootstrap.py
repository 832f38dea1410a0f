"""ppo.bootstrap_through_goals: GAE runs on through a goal into the kickoff that follows (its value is the next
row's), where by default a goal stops it; refused where a termination need not be a goal."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from speedflip.algos.ppo_learner import PPOLearner
from speedflip.config import ConfigError, build_config
from speedflip.models.build import build_policy_model
from speedflip.rollout import EpisodeStats, Rollout

OBS_DIM, NUM_ACTIONS = 4, 3
GAMMA, LAMBDA = 0.9, 0.5


def _learner(bootstrap: bool) -> PPOLearner:
    cfg = build_config({
        "ppo": {"num_steps": 2, "minibatch_size": 2, "policy_layers": [8], "critic_layers": [8], "gamma": GAMMA,
                "gae_lambda": LAMBDA, "normalize_rewards": False, "bootstrap_through_goals": bootstrap},
        "run": {"device": "cpu"},
    })  # fmt: skip
    return PPOLearner(cfg, build_policy_model(cfg, OBS_DIM, NUM_ACTIONS), torch.device("cpu"), OBS_DIM)


def _rollout_with_a_goal_at_step_0() -> Rollout:
    """One agent, two steps: it scores (+10) at step 0; step 1 is the kickoff after it (value 2, reward 0.5),
    and the value after step 1 is 3."""
    zeros = np.zeros((2, 1), np.float32)
    return Rollout(
        obs=np.zeros((2, 1, OBS_DIM), np.float32), raw_obs=np.zeros((2, 1, OBS_DIM), np.float32),
        actions=np.zeros((2, 1), np.int64), log_probs=zeros.copy(),
        values=np.array([[1.0], [2.0]], np.float32), rewards=np.array([[10.0], [0.5]], np.float32),
        terminated=np.array([[True], [False]]), truncated=np.zeros((2, 1), bool),
        truncation_values=zeros.copy(), last_values=np.array([3.0], np.float32),
        stats=EpisodeStats(collect_seconds=0.0, steps=2),
    )  # fmt: skip


def _advantages(bootstrap: bool) -> list[float]:
    batch = _learner(bootstrap).prepare(_rollout_with_a_goal_at_step_0())
    return [float(a) for a in batch.advantages]


def test_a_goal_ends_the_return_by_default() -> None:
    # step 1: 0.5 + 0.9 * 3 - 2 = 1.2; step 0 stops at the goal: 10 - 1 = 9
    assert _advantages(False) == pytest.approx([9.0, 1.2])


def test_with_bootstrap_through_goals_the_return_runs_on_into_the_kickoff() -> None:
    # step 0: delta 10 + 0.9 * 2 - 1 = 10.8, plus gamma * lambda * the next advantage 1.2: 10.8 + 0.45 * 1.2
    assert _advantages(True) == pytest.approx([10.8 + 0.45 * 1.2, 1.2])


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"gym": {"env_id": "CartPole-v1"}}, "a Gymnasium environment"),
        ({"env": {"rlgym": "my_envs:build"}}, "env.rlgym"),
    ],
)
def test_refused_where_a_termination_need_not_be_a_goal(overrides: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named) as err:
        build_config({"ppo": {"bootstrap_through_goals": True, "minibatch_size": 64}, **overrides})
    assert "set ppo.bootstrap_through_goals=false" in str(err.value)
