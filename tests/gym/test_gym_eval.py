"""Evaluation: exact episode counts, statistics by hand, success rules, verdicts."""

from __future__ import annotations

import numpy as np
import pytest
from gym_helpers import register_test_envs

from speedflip._types import Array
from speedflip.config import GymConfig
from speedflip.gym.evaluate import Episodes, run_episodes, success_rule, summarize, verdict


class ConstantPolicy:
    """Always the same action; remembers the ``starts`` masks it was given."""

    def __init__(self, action: int) -> None:
        self.action = action
        self.starts: list[list[bool]] = []

    def reset(self, num_envs: int) -> None:
        self.num_envs = num_envs

    def act(self, obs: Array, starts: Array, deterministic: bool) -> Array:
        self.starts.append([bool(s) for s in starts])
        return np.full(len(obs), self.action)


def test_exactly_n_episodes_split_over_env_copies() -> None:
    register_test_envs()
    policy = ConstantPolicy(0)
    result = run_episodes("SfCounter-v0", {}, policy, episodes=5, num_envs=2, seed=0, deterministic=True)
    assert result.lengths == [3] * 5
    assert result.truncated == [True] * 5 and result.terminated == [False] * 5
    assert policy.num_envs == 2
    # 3 episodes on copy 0 -> 9 steps; a start every 3 steps
    assert [s[0] for s in policy.starts] == [True, False, False] * 3


def test_cartpole_always_left_fails_fast() -> None:
    result = run_episodes("CartPole-v1", {}, ConstantPolicy(0), episodes=3, num_envs=3, seed=0, deterministic=True)
    assert len(result.returns) == 3
    assert all(8 <= n <= 12 for n in result.lengths)  # the pole falls in about 10 steps
    assert result.terminated == [True] * 3


def test_summary_statistics_by_hand() -> None:
    episodes = Episodes(returns=[500.0, 100.0, 300.0, 500.0], lengths=[500, 100, 300, 500],
                        terminated=[False, True, True, False], truncated=[True, False, False, True])  # fmt: skip
    cfg = GymConfig(env_id="CartPole-v1", success="truncated", solved_return=475, random_return=22)
    s = summarize(episodes, cfg, "CartPole-v1", deterministic=True)
    assert s.mean_return == 350.0
    assert s.std_return == pytest.approx(np.sqrt((150**2 + 250**2 + 50**2 + 150**2) / 4))
    assert (s.min_return, s.max_return) == (100.0, 500.0)
    assert s.mean_length == 350.0 and (s.min_length, s.max_length) == (100, 500)
    assert s.success_rate == 0.5
    assert s.solved is False
    assert s.verdict.startswith("learning, not solved") and "72%" in s.verdict  # (350 - 22) / (475 - 22)


def test_success_rules() -> None:
    eps = Episodes([10.0, -200.0], [5, 500], [True, False], [False, True])
    assert summarize(eps, GymConfig(success="terminated"), "Acrobot-v1", True).success_rate == 0.5
    # auto: return >= the registered threshold (Acrobot-v1: -100)
    assert success_rule(GymConfig(), "Acrobot-v1") == ("return", -100.0)
    assert summarize(eps, GymConfig(), "Acrobot-v1", True).success_rate == 0.5
    assert summarize(eps, GymConfig(success="return", success_return=20.0), "Acrobot-v1", True).success_rate == 0.0
    register_test_envs()  # no registered threshold: success undefined
    s = summarize(eps, GymConfig(), "SfCounter-v0", True)
    assert s.success_rate is None and s.solved is None and "no solved threshold" in s.verdict


def test_verdicts() -> None:
    assert verdict(480.0, 475.0, 22.0, "CartPole-v1").startswith("solved")
    assert verdict(25.0, 475.0, 22.0, "CartPole-v1").startswith("not learned")
    assert verdict(200.0, 475.0, None, "CartPole-v1").startswith("not solved")
