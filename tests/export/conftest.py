"""Fixtures for the export tests: tiny trained checkpoints (built once per session) and exported bots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from speedflip.config import build_config
from speedflip.train.trainer import Trainer


def train_tiny(run_dir: Path, team_size: int, env: dict[str, Any] | None = None) -> Path:
    """Two collect + PPO update rounds of a tiny run; returns the checkpoint folder."""
    cfg = build_config(
        {
            "env": {"num_arenas": 2, "blue_size": team_size, "orange_size": team_size, **(env or {})},
            "ppo": {"num_steps": 8, "minibatch_size": 16, "policy_layers": [32, 32], "critic_layers": [16]},
            "run": {"seed": 3, "device": "cpu", "collector": "inprocess", "num_threads": 1, "torch_threads": 1,
                    "tensorboard": False},
        }
    )  # fmt: skip
    trainer = Trainer(cfg)
    try:
        for _ in range(2):
            batch, raw_obs, _ = trainer.collect()
            trainer.update(batch, raw_obs)
        return trainer.save(run_dir / "checkpoints")
    finally:
        trainer.close()


@pytest.fixture(scope="session")
def run_1v1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("export-runs") / "tiny1v1"
    train_tiny(run, 1)
    return run


@pytest.fixture(scope="session")
def run_2v2_advanced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2v2 with the advanced observation (nearest pads with timers) and a frame stack of 2."""
    run = tmp_path_factory.mktemp("export-runs") / "tiny2v2adv"
    train_tiny(run, 2, {"obs_builder": "advanced", "frame_stack": 2, "nearest_pads": 3})
    return run
