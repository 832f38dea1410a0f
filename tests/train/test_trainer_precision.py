"""The Rocket League trainer's update precision: bfloat16 for the feed-forward networks where the CPU has it."""

from __future__ import annotations

import pytest
import torch
from sf_helpers import tiny_config
from test_trainer_recurrent import recurrent_config

from speedflip import accel
from speedflip.config import Config
from speedflip.train.trainer import Trainer


@pytest.mark.parametrize(
    ("cfg", "dtype"),
    [
        (tiny_config(), torch.bfloat16),
        (tiny_config(run={"update_precision": "float32"}), None),
        (recurrent_config(), None),  # auto: only the feed-forward networks were measured
        (recurrent_config(run={"update_precision": "bfloat16"}), torch.bfloat16),
    ],
    ids=["auto", "float32", "recurrent-auto", "recurrent-bfloat16"],
)
def test_trainer_update_precision(cfg: Config, dtype: torch.dtype | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accel, "cpu_has_native_bfloat16", lambda: True)
    trainer = Trainer(cfg)
    try:
        assert trainer.learner.gradient_step.dtype == dtype
        assert any("bfloat16" in note for note in trainer.learner.notes) == (dtype is not None)
        batch, raw_obs, _ = trainer.collect()
        metrics = trainer.update(batch, raw_obs)
        assert metrics["nonfinite_minibatches"] == 0
        assert all(bool(torch.isfinite(p).all()) for p in trainer.model.parameters())
    finally:
        trainer.close()
