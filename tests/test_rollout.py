"""merge_rollouts: rollouts of several collectors side by side, stats weighted by agent steps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from speedflip.rollout import EpisodeStats, Rollout, merge_rollouts


def _rollout(rows: int, value: float, steps: int, touches: float | None, version: int = 3) -> Rollout:
    T = 2
    full = np.full((T, rows), value, np.float32)
    return Rollout(
        obs=np.full((T, rows, 1), value, np.float32), raw_obs=np.full((T, rows, 1), value, np.float32),
        actions=np.full((T, rows), int(value), np.int64), log_probs=full, values=full, rewards=full,
        terminated=np.zeros((T, rows), bool), truncated=np.zeros((T, rows), bool), truncation_values=full,
        last_values=np.full(rows, value, np.float32),
        stats=EpisodeStats(1.0 + value, steps, [value], [10.0], touches, None, {"goal": value}, value, {},
                           version),
        starts=np.zeros((T, rows), bool), states=torch.full((1, 1, rows, 2), value),
    )  # fmt: skip


def test_rows_are_joined_and_rates_weighted_by_steps() -> None:
    merged = merge_rollouts([_rollout(2, 1.0, 100, 3.0), _rollout(3, 2.0, 300, None)])
    assert merged.obs.shape == (2, 5, 1) and merged.last_values.tolist() == [1, 1, 2, 2, 2]
    assert merged.actions[0].tolist() == [1, 1, 2, 2, 2]
    assert merged.states is not None and merged.states.shape == (1, 1, 5, 2)
    assert merged.starts is not None and merged.starts.shape == (2, 5)
    assert merged.masks is None and merged.next_obs is None and merged.teacher_actions is None
    s = merged.stats
    assert s.steps == 400 and s.episode_returns == [1.0, 2.0] and s.policy_version == 3
    assert s.touches_per_minute == 3.0  # the rollout without a figure does not count
    assert s.reward_means["goal"] == pytest.approx((1.0 * 100 + 2.0 * 300) / 400)  # 1.75
    assert s.reward_per_step == pytest.approx(1.75)
    assert s.collect_seconds == 3.0  # the slower one: they ran in parallel


def test_one_rollout_is_itself_and_mixed_versions_are_refused() -> None:
    one = _rollout(2, 1.0, 100, 3.0)
    assert merge_rollouts([one]) is one
    with pytest.raises(ValueError, match="one policy version"):
        merge_rollouts([one, _rollout(2, 1.0, 100, 3.0, version=4)])
    with pytest.raises(ValueError, match="at least one"):
        merge_rollouts([])


def test_teacher_rows_are_joined_when_every_rollout_has_them() -> None:
    a, b = _rollout(2, 1.0, 100, 3.0), _rollout(3, 2.0, 300, None)
    a.teacher_actions = np.array([[4, 5], [6, 7]], np.int64)
    b.teacher_actions = np.array([[8, 9, 10], [11, 12, 13]], np.int64)
    merged = merge_rollouts([a, b])
    assert merged.teacher_actions is not None
    assert merged.teacher_actions.tolist() == [[4, 5, 8, 9, 10], [6, 7, 11, 12, 13]]
