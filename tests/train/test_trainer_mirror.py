"""The trainer with ppo.mirror_augment on real RocketSim: each rollout row is trained on with its mirror, the
rule bot's rows (kickstart) are mirrored too, and the observation statistics stay mirror-symmetric."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from sf_helpers import tiny_config

from speedflip.algos.ppo import Batch
from speedflip.env.mirror import CONTROL_SIGNS
from speedflip.rollout import PolicyWeights
from speedflip.train.trainer import Trainer, summarize_iteration

ROWS = 2 * 2 * 8  # arenas x cars x steps


def test_a_mirrored_rollout_trains_on_twice_the_rows() -> None:
    cfg = tiny_config(ppo={"mirror_augment": "both", "kickstart_coef": 0.5, "kickstart_steps": 10 * ROWS})
    trainer = Trainer(cfg)
    try:
        mirror = trainer.learner.mirror
        assert mirror is not None
        table = torch.as_tensor(trainer.collector.env.actions.table)
        for _ in range(2):
            batch, raw_obs, _ = trainer.collect()
            assert isinstance(batch, Batch) and batch.mirrored_rows is not None and len(batch) == 2 * ROWS
            first, second = batch.obs[:ROWS], batch.obs[ROWS:]
            torch.testing.assert_close(second, mirror.obs_tensor(first))
            signs = torch.tensor(CONTROL_SIGNS)
            torch.testing.assert_close(table[batch.actions[ROWS:]], table[batch.actions[:ROWS]] * signs)
            assert batch.teacher_actions is not None
            torch.testing.assert_close(table[batch.teacher_actions[ROWS:]], table[batch.teacher_actions[:ROWS]] * signs)
            torch.testing.assert_close(batch.advantages[ROWS:], batch.advantages[:ROWS])
            metrics = trainer.update(batch, raw_obs)
            assert metrics["minibatch_updates"] == cfg.ppo.update_epochs * ROWS / cfg.ppo.minibatch_size
            assert metrics["mirror_kl"] >= 0.0 and np.isfinite(metrics["kickstart_cross_entropy"])
        rms = trainer.learner.obs_rms
        np.testing.assert_allclose(rms.mean[mirror.obs_index] * mirror.obs_sign, rms.mean, atol=1e-6)
        np.testing.assert_allclose(rms.var[mirror.obs_index], rms.var, rtol=1e-6)
    finally:
        trainer.close()


def test_random_mirroring_keeps_the_rollout_size_and_mirrors_the_rule_bots_rows_with_the_learners() -> None:
    cfg = tiny_config(ppo={"mirror_augment": "random", "kickstart_coef": 0.5, "kickstart_steps": 10 * ROWS})
    trainer = Trainer(cfg)
    try:
        batch, raw_obs, stats = trainer.collect()
        assert isinstance(batch, Batch) and len(batch) == ROWS and batch.mirrored_rows is not None
        assert 0 < int(batch.mirrored_rows.sum()) < ROWS
        metrics = trainer.update(batch, raw_obs)
        assert metrics["minibatch_updates"] == cfg.ppo.update_epochs * ROWS / cfg.ppo.minibatch_size
        assert metrics["mirror_kl"] >= 0.0
        record = summarize_iteration(trainer, stats, metrics, 1.0, 1.0)
        assert record["losses/mirror_kl"] == metrics["mirror_kl"]
    finally:
        trainer.close()


def test_the_symmetry_loss_alone_keeps_the_rows_and_reports_the_loss() -> None:
    cfg = tiny_config(ppo={"mirror_coef": 0.5})
    trainer = Trainer(cfg)
    try:
        mirror = trainer.learner.mirror
        assert mirror is not None
        batch, raw_obs, stats = trainer.collect()
        assert isinstance(batch, Batch) and len(batch) == ROWS and batch.mirrored_rows is None
        assert batch.mirror is mirror
        metrics = trainer.update(batch, raw_obs)
        record = summarize_iteration(trainer, stats, metrics, 1.0, 1.0)
        assert record["losses/mirror_loss"] == metrics["mirror_loss"] > 0.0 and "losses/mirror_kl" not in record
        rms = trainer.learner.obs_rms  # the statistics are mirror-symmetric here too
        np.testing.assert_allclose(rms.mean[mirror.obs_index] * mirror.obs_sign, rms.mean, atol=1e-6)
    finally:
        trainer.close()


def test_the_mirrored_update_runs_beside_the_next_collection() -> None:
    """The 1v1 preset's pair (ppo.mirror_augment=both, run.overlap_collection): the update of rollout k, on its rows
    and their mirrors, runs while rollout k+1 is collected by the weights from before it."""
    cfg = tiny_config(ppo={"mirror_augment": "both"}, run={"overlap_collection": True})
    trainer = Trainer(cfg)
    acting_versions: list[int] = []
    collect = trainer.collector.collect

    def spy(weights: PolicyWeights, *args: Any) -> Any:
        acting_versions.append(weights.version)
        return collect(weights, *args)

    trainer.collector.collect = spy  # type: ignore[method-assign,assignment]
    try:
        first, raw_obs, _ = trainer.collect()
        assert isinstance(first, Batch) and len(first) == 2 * ROWS
        assert trainer.update(first, raw_obs) == {}  # kept for the next collect
        second, raw_obs, _ = trainer.collect()  # acted by the weights from before the first update ...
        assert acting_versions == [0, 0] and trainer.learner.version == 1  # ... which trained meanwhile
        assert isinstance(second, Batch)
        # a mirror keeps the acting log-probability
        torch.testing.assert_close(second.log_probs[ROWS:], second.log_probs[:ROWS])
        metrics = trainer.update(second, raw_obs)  # the first update's metrics: minibatches of rows and their mirrors
        assert metrics["minibatch_updates"] == cfg.ppo.update_epochs * ROWS / cfg.ppo.minibatch_size
        assert metrics["mirror_kl"] >= 0.0
        trainer.finish_pending_update()  # a checkpoint now would include the second rollout's update
        assert trainer.learner.version == 2
    finally:
        trainer.close()
