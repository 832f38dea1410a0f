"""compute_gae against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from speedflip.algos.ppo import compute_gae


def test_gae_terminated_truncated_and_last_value_bootstrap() -> None:
    # T=3 steps, N=2 agents, gamma=0.9, lambda=0.8 -> gamma*lambda = 0.72.
    # Column 0 is terminated at t=1 (a goal): no bootstrap at t=1 and the recursion is cut there.
    # Column 1 is truncated at t=1 (a time limit): bootstraps from truncation_values[1, 1] = 3.0 and
    # the recursion is cut there too. Both columns bootstrap from last_values at t=2.
    rewards = np.array([[1.0, 0.5], [2.0, 1.0], [0.0, -1.0]], np.float32)
    values = np.array([[0.5, 1.0], [1.0, 2.0], [0.2, 0.4]], np.float32)
    terminated = np.array([[False, False], [True, False], [False, False]])
    truncated = np.array([[False, False], [False, True], [False, False]])
    # 99 everywhere the step was not truncated: these entries must be ignored
    # (including [1, 0], which is terminated, not truncated).
    truncation_values = np.array([[99.0, 99.0], [99.0, 3.0], [99.0, 99.0]], np.float32)
    last_values = np.array([0.5, -0.5], np.float32)

    advantages, returns = compute_gae(
        rewards, values, terminated, truncated, truncation_values, last_values, gamma=0.9, gae_lambda=0.8
    )

    # Column 0 (terminated at t=1):
    #   t=2: next = last_values[0] = 0.5; delta = 0.0 + 0.9*0.5 - 0.2 = 0.25;   A = 0.25
    #   t=1: terminated -> next = 0;      delta = 2.0 + 0       - 1.0 = 1.0;    A = 1.0 (cut, no 0.72*0.25)
    #   t=0: next = values[1,0] = 1.0;    delta = 1.0 + 0.9*1.0 - 0.5 = 1.4;    A = 1.4 + 0.72*1.0 = 2.12
    # Column 1 (truncated at t=1, truncation value 3.0):
    #   t=2: next = last_values[1] = -0.5; delta = -1.0 + 0.9*(-0.5) - 0.4 = -1.85; A = -1.85
    #   t=1: truncated -> next = 3.0;      delta = 1.0 + 0.9*3.0 - 2.0 = 1.7;       A = 1.7 (cut)
    #   t=0: next = values[1,1] = 2.0;     delta = 0.5 + 0.9*2.0 - 1.0 = 1.3;       A = 1.3 + 0.72*1.7 = 2.524
    expected_adv = np.array([[2.12, 2.524], [1.0, 1.7], [0.25, -1.85]])
    # returns = advantages + values
    expected_ret = np.array([[2.62, 3.524], [2.0, 3.7], [0.45, -1.45]])

    np.testing.assert_allclose(advantages, expected_adv, rtol=0, atol=1e-5)
    np.testing.assert_allclose(returns, expected_ret, rtol=0, atol=1e-5)
    assert advantages.dtype == np.float32 and returns.dtype == np.float32
    assert advantages.shape == returns.shape == (3, 2)


def test_gae_lambda_one_gamma_one_is_monte_carlo_plus_bootstrap() -> None:
    # No episode ends, gamma = lambda = 1: A_t = sum_{k>=t} r_k + V(s_T) - V(s_t).
    rewards = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
    values = np.array([[10.0], [20.0], [30.0], [40.0]], np.float32)
    no = np.zeros((4, 1), bool)
    last = np.array([5.0], np.float32)
    adv, ret = compute_gae(rewards, values, no, no, np.zeros((4, 1), np.float32), last, 1.0, 1.0)
    # t=3: 4 + 5 - 40 = -31; t=2: 3+4+5-30 = -18; t=1: 2+3+4+5-20 = -6; t=0: 1+2+3+4+5-10 = 5
    np.testing.assert_allclose(adv[:, 0], [5.0, -6.0, -18.0, -31.0], atol=1e-5)
    # returns are then the bootstrapped Monte-Carlo returns: 15, 14, 12, 9
    np.testing.assert_allclose(ret[:, 0], [15.0, 14.0, 12.0, 9.0], atol=1e-5)


def test_gae_lambda_zero_is_one_step_td() -> None:
    rewards = np.array([[1.0], [1.0]], np.float32)
    values = np.array([[2.0], [3.0]], np.float32)
    no = np.zeros((2, 1), bool)
    adv, _ = compute_gae(rewards, values, no, no, np.zeros((2, 1), np.float32), np.array([4.0]), 0.5, 0.0)
    # t=1: 1 + 0.5*4 - 3 = 0; t=0: 1 + 0.5*3 - 2 = 0.5 (lambda=0: nothing carried back)
    np.testing.assert_allclose(adv[:, 0], [0.5, 0.0], atol=1e-6)


@pytest.mark.parametrize("flag", ["terminated", "truncated"])
def test_gae_done_at_last_step_ignores_last_values(flag: str) -> None:
    rewards = np.array([[1.0]], np.float32)
    values = np.array([[0.25]], np.float32)
    done = np.array([[True]])
    not_done = np.array([[False]])
    term, trunc = (done, not_done) if flag == "terminated" else (not_done, done)
    adv, _ = compute_gae(rewards, values, term, trunc, np.array([[2.0]], np.float32), np.array([100.0]), 0.5, 0.9)
    # terminated: 1 + 0 - 0.25 = 0.75; truncated: 1 + 0.5*2 - 0.25 = 1.75; last_values never used
    expected = 0.75 if flag == "terminated" else 1.75
    np.testing.assert_allclose(adv, [[expected]], atol=1e-6)
