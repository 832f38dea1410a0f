"""The trainer with ppo.release_kl_coef: the kickstart's rollouts carry the rule bot's rows until
ppo.kickstart_steps; the update at that step freezes the policy, and the rollouts after it train with the
KL toward the frozen copy, which a checkpoint keeps."""

from __future__ import annotations

from pathlib import Path

import torch
from sf_helpers import tiny_config

from speedflip.algos.ppo import Batch
from speedflip.train.trainer import Trainer

STEPS_PER_ROLLOUT = 2 * 2 * 8  # arenas x cars x steps


def test_the_update_at_the_release_freezes_the_policy_and_the_next_trains_toward_it(tmp_path: Path) -> None:
    release = 2 * STEPS_PER_ROLLOUT
    cfg = tiny_config(ppo={"kickstart_coef": 0.5, "kickstart_steps": release, "release_kl_coef": 0.5})
    trainer = Trainer(cfg)
    try:
        batch, raw_obs, _ = trainer.collect()
        assert isinstance(batch, Batch) and batch.teacher_actions is not None and batch.anchor_logits is None
        first = trainer.update(batch, raw_obs)  # at step 32 the kickstart's weight is 0.25
        assert "kickstart_cross_entropy" in first and "release_kl" not in first
        assert trainer.learner.release_anchor is None

        batch, raw_obs, _ = trainer.collect()
        assert trainer.global_step == release
        before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        trainer.update(batch, raw_obs)  # the kickstart's weight is 0 from here: the policy is frozen first
        assert trainer.learner.release_anchor is not None
        frozen = {k: v.clone() for k, v in trainer.learner.release_anchor.state_dict().items()}
        for k, v in before.items():  # the copy of the policy as the kickstart left it
            torch.testing.assert_close(frozen[k], v)

        batch, raw_obs, _ = trainer.collect()
        assert isinstance(batch, Batch) and batch.teacher_actions is None and batch.anchor_logits is not None
        second = trainer.update(batch, raw_obs)
        assert "kickstart_cross_entropy" not in second and second["release_kl"] >= 0.0
        for k, v in trainer.learner.release_anchor.state_dict().items():
            torch.testing.assert_close(v, frozen[k])

        path = trainer.save(tmp_path)
        resumed = Trainer(cfg)
        try:
            resumed.load(path)
            assert resumed.learner.release_anchor is not None
            for k, v in resumed.learner.release_anchor.state_dict().items():
                torch.testing.assert_close(v, frozen[k])
        finally:
            resumed.close()
    finally:
        trainer.close()
