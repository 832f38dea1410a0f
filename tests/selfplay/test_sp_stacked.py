"""Stacked pool opponents: one batched pass gives each row its own snapshot's logits and actions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from sp_helpers import tiny_config

from speedflip.selfplay.policies import NeuralPolicy
from speedflip.selfplay.stacked import StackedPolicies, can_stack
from speedflip.train.trainer import Trainer


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three checkpoints of one tiny network with different weights and observation statistics."""
    folder = tmp_path_factory.mktemp("stacked")
    paths = []
    for seed in (1, 2, 3):
        trainer = Trainer(tiny_config(run={"seed": seed}))
        try:
            batch, raw_obs, _ = trainer.collect()
            trainer.update(batch, raw_obs)
            paths.append(trainer.save(folder / f"s{seed}"))
        finally:
            trainer.close()
    return paths


def _policies(paths: list[Path], deterministic: bool = True) -> list[NeuralPolicy]:
    return [NeuralPolicy(p, 103, deterministic=deterministic) for p in paths]


def test_each_row_gets_its_own_snapshots_logits(snapshots: list[Path]) -> None:
    policies = _policies(snapshots)
    assert can_stack(policies)
    stacked = StackedPolicies(policies)
    rng = np.random.default_rng(0)
    obs = rng.normal(0.0, 2.0, size=(11, 103)).astype(np.float32)
    members = np.array([2, 0, 0, 1, 2, 2, 0, 1, 1, 2, 0])  # uneven groups, interleaved
    got = stacked.logits(obs, members)
    for r, m in enumerate(members):
        p = policies[m]
        with torch.no_grad():
            expected = p.model.policy(torch.as_tensor(p.obs_rms.normalize(obs[r : r + 1])))[0]
        torch.testing.assert_close(got[r], expected, rtol=1e-5, atol=1e-5)
    # the snapshots really differ, so a row given the wrong snapshot would fail above
    assert not torch.allclose(stacked.logits(obs[:1], np.array([0])), stacked.logits(obs[:1], np.array([1])))
    # deterministic players take the argmax, as NeuralPolicy does
    actions = stacked.act(obs, members)
    for r, m in enumerate(members):
        assert actions[r] == policies[m].act(obs[r : r + 1], None, np.zeros(1))[0]  # type: ignore[arg-type]


def test_sampling_follows_the_logits(snapshots: list[Path]) -> None:
    policies = _policies(snapshots, deterministic=False)
    with torch.no_grad():  # peaked distributions, a different peak per snapshot
        policies[0].model.policy[-1].bias[7] += 4.0
        policies[1].model.policy[-1].bias[5] += 4.0
    stacked = StackedPolicies(policies, seed=5)
    obs = np.zeros((4000, 103), np.float32)
    members = np.repeat([0, 1], 2000)
    actions = stacked.act(obs, members)
    for m, peak in ((0, 7), (1, 5)):
        probs = torch.softmax(stacked.logits(obs[:1], np.array([m]))[0], -1).numpy()
        assert probs.argmax() == peak and probs[peak] > 0.3
        frequencies = np.bincount(actions[members == m], minlength=probs.size) / 2000
        assert np.abs(frequencies - probs).max() < 0.04  # 4 standard errors at p = 0.5


def test_only_same_shaped_feed_forward_policies_stack(snapshots: list[Path], tmp_path: Path) -> None:
    trainer = Trainer(tiny_config(ppo={"policy_layers": [8]}))
    try:
        other = trainer.save(tmp_path / "other")
    finally:
        trainer.close()
    assert not can_stack([*_policies(snapshots), NeuralPolicy(other, 103)])
    assert not can_stack([])
    with pytest.raises(ValueError, match="same layer shapes"):
        StackedPolicies([*_policies(snapshots), NeuralPolicy(other, 103)])
