"""Fixtures for the replay tests: a tiny trained 2v2 checkpoint (built once per session)."""

from __future__ import annotations

from pathlib import Path

import pytest

from speedflip.config import build_config
from speedflip.train.trainer import Trainer


def train_tiny(run_dir: Path, team_size: int) -> Path:
    """One collect + PPO update of a tiny run; returns the checkpoint folder."""
    cfg = build_config(
        {
            "env": {"num_arenas": 2, "blue_size": team_size, "orange_size": team_size},
            "ppo": {"num_steps": 8, "minibatch_size": 16, "policy_layers": [16], "critic_layers": [16]},
            "run": {"seed": 3, "device": "cpu", "collector": "inprocess", "num_threads": 1, "torch_threads": 1,
                    "tensorboard": False},
        }
    )  # fmt: skip
    trainer = Trainer(cfg)
    try:
        batch, raw_obs, _ = trainer.collect()
        trainer.update(batch, raw_obs)
        return trainer.save(run_dir / "checkpoints")
    finally:
        trainer.close()


@pytest.fixture(scope="session")
def tiny_run_2v2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("watch-runs") / "tiny2v2"
    train_tiny(run, team_size=2)
    return run
