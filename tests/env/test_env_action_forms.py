"""Continuous and multi-discrete controls by hand, the action mask, and the policy heads behind them."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from speedflip.config import EnvConfig
from speedflip.env import layout as L
from speedflip.env.action_forms import action_mask, controls_from_continuous, controls_from_multi_discrete
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.models.heads import CategoricalHead, GaussianHead, MultiDiscreteHead, make_head


def test_continuous_controls_by_hand() -> None:
    actions = np.array(
        [
            [0.5, -0.25, 2.0, -3.0, 1.0, 0.1, -0.1, 0.0],
            [-1.5, 1.0000001, -1.0, 0.0, -0.999, 0.0, 5.0, -2.0],
        ],
        np.float32,
    )
    out = controls_from_continuous(actions)
    np.testing.assert_array_equal(
        out,
        np.array(
            [
                [0.5, -0.25, 1.0, -1.0, 1.0, 1.0, 0.0, 0.0],  # analog clamped to [-1, 1]; buttons pressed above 0
                [-1.0, 1.0, -1.0, 0.0, -0.999, 0.0, 1.0, 0.0],
            ],
            np.float32,
        ),
    )
    assert out.dtype == np.float32
    assert actions[0, 2] == 2.0  # the input is not modified


def test_multi_discrete_controls_by_hand() -> None:
    # 5 bins: index 0..4 -> -1, -0.5, 0, 0.5, 1
    actions = np.array([[0, 1, 2, 3, 4, 1, 0, 1], [4, 4, 0, 2, 2, 0, 1, 0]])
    out = controls_from_multi_discrete(actions, bins=5)
    np.testing.assert_array_equal(
        out, np.array([[-1, -0.5, 0, 0.5, 1, 1, 0, 1], [1, 1, -1, 0, 0, 0, 1, 0]], np.float32)
    )
    # 3 bins: -1, 0, 1
    np.testing.assert_array_equal(
        controls_from_multi_discrete(np.array([[0, 1, 2, 1, 0, 0, 0, 0]]), bins=3), [[-1, 0, 1, 0, -1, 0, 0, 0]]
    )
    with pytest.raises(ValueError, match="out of range"):
        controls_from_multi_discrete(np.array([[5, 0, 0, 0, 0, 0, 0, 0]]), bins=5)
    with pytest.raises(ValueError, match="out of range"):
        controls_from_multi_discrete(np.array([[0, 0, 0, 0, 0, 2, 0, 0]]), bins=5)
    with pytest.raises(ValueError, match="shape"):
        controls_from_multi_discrete(np.zeros((2, 5), np.int64), bins=5)


def test_action_mask_by_hand() -> None:
    env = RocketLeagueVecEnv(EnvConfig(num_arenas=1, state_setters={"kickoff": 1.0}), seed=0)
    try:
        env.reset()
        table = env.actions.table
        state = env.state.copy()
        cars = state.cars  # [K, C, 2 perspectives, F]
        cars[0, 0, :, L.CAR_BOOST] = 0.0  # blue: no boost, on the ground
        cars[0, 0, :, L.CAR_ON_GROUND] = 1.0
        cars[0, 1, :, L.CAR_BOOST] = 0.5  # orange: boost, in the air
        cars[0, 1, :, L.CAR_ON_GROUND] = 0.0
        mask = action_mask(state, env.car_teams, table)
        assert mask.shape == (2, len(table))
        boost = table[:, 6] > 0
        air_only = ((table[:, 2] != 0) | (table[:, 4] != 0)) & (table[:, 5] == 0)
        neutral = np.all(table == 0, axis=1)
        np.testing.assert_array_equal(mask[0], ~(boost | air_only) | neutral)
        assert mask[1].all()  # in the air with boost: everything acts
        assert mask[:, np.flatnonzero(neutral)[0]].all()
    finally:
        env.close()


def test_categorical_head_log_prob_by_hand_and_masks() -> None:
    head = CategoricalHead(3)
    logits = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    actions = torch.tensor([2, 1])
    log_prob, entropy = head.log_prob_entropy(logits, actions)
    z = math.log(math.exp(1) + math.exp(2) + math.exp(3))
    assert log_prob[0].item() == pytest.approx(3.0 - z, abs=1e-6)
    assert log_prob[1].item() == pytest.approx(math.log(1 / 3), abs=1e-6)
    assert entropy[1].item() == pytest.approx(math.log(3), abs=1e-6)
    # a masked row has probability 0 and is never sampled, also when it has the largest logit
    mask = torch.tensor([[True, True, False], [False, True, True]])
    dist = head.dist(logits, mask)
    assert dist.probs[0, 2].item() == 0.0 and dist.probs[1, 0].item() == 0.0
    masked_lp, _ = head.log_prob_entropy(logits, torch.tensor([1, 2]), mask)
    assert masked_lp[0].item() == pytest.approx(2.0 - math.log(math.exp(1) + math.exp(2)), abs=1e-6)
    assert masked_lp[1].item() == pytest.approx(math.log(0.5), abs=1e-6)
    torch.manual_seed(0)
    draws = torch.stack([head.sample(logits, mask, deterministic=False) for _ in range(500)])
    assert not (draws[:, 0] == 2).any() and not (draws[:, 1] == 0).any()
    np.testing.assert_array_equal(head.sample(logits, mask, deterministic=True).numpy(), [1, 1])
    assert head.sample(logits, None, deterministic=True).tolist() == [2, 0]


def test_gaussian_head_shapes_and_log_prob_by_hand() -> None:
    head = GaussianHead(dim=8, initial_log_std=0.0)  # std 1
    assert head.out_dim == 8
    means = torch.zeros(4, 8)
    sample = head.sample(means, None, deterministic=False)
    assert sample.shape == (4, 8)
    assert torch.equal(head.sample(means, None, deterministic=True), means)
    actions = torch.ones(4, 8)
    log_prob, entropy = head.log_prob_entropy(means, actions)
    by_hand = 8 * (-0.5 * 1.0 - 0.5 * math.log(2 * math.pi))
    assert log_prob.shape == entropy.shape == (4,)
    assert log_prob[0].item() == pytest.approx(by_hand, abs=1e-5)
    assert entropy[0].item() == pytest.approx(8 * (0.5 + 0.5 * math.log(2 * math.pi)), abs=1e-5)


def test_multi_discrete_head_shapes_and_log_prob_by_hand() -> None:
    head = MultiDiscreteHead(bins=3)
    assert head.out_dim == 5 * 3 + 3 == make_head("multi_discrete", 0, bins=3).out_dim
    params = torch.zeros(2, head.out_dim)
    params[0, 0:3] = torch.tensor([0.0, 0.0, math.log(2.0)])  # throttle bins: probs 1/4, 1/4, 1/2
    params[0, 15] = math.log(3.0)  # jump: p = 3/4
    actions = torch.tensor([[2, 1, 0, 1, 2, 1, 0, 1], [0, 0, 0, 0, 0, 0, 0, 0]])
    log_prob, entropy = head.log_prob_entropy(params, actions)
    by_hand = math.log(0.5) + 4 * math.log(1 / 3) + math.log(0.75) + 2 * math.log(0.5)
    assert log_prob[0].item() == pytest.approx(by_hand, abs=1e-5)
    assert log_prob[1].item() == pytest.approx(5 * math.log(1 / 3) + 3 * math.log(0.5), abs=1e-5)
    assert entropy[1].item() == pytest.approx(5 * math.log(3) + 3 * math.log(2), abs=1e-5)
    sample = head.sample(params, None, deterministic=False)
    assert sample.shape == (2, 8)
    assert sample[:, :5].min() >= 0 and sample[:, :5].max() <= 2 and set(sample[:, 5:].unique().tolist()) <= {0, 1}
    best = head.sample(params, None, deterministic=True)
    assert best[0, 0].item() == 2 and best[0, 5].item() == 1 and best[1, 5].item() == 0
    # what the head samples is what controls_from_multi_discrete accepts
    controls = controls_from_multi_discrete(sample.numpy(), bins=3)
    assert np.all(np.abs(controls) <= 1.0)


def test_make_head_refuses_unknown() -> None:
    assert make_head("categorical", 81).out_dim == 81
    with pytest.raises(ValueError, match="unknown policy head"):
        make_head("beta", 3)
