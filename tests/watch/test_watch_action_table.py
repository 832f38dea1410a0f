"""``speedflip watch`` with a run trained with its own lookup table: the replay is played with that table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from speedflip.config import build_config
from speedflip.env.action_forms import build_table
from speedflip.selfplay.evaluate import training_obs_options
from speedflip.train.trainer import Trainer
from speedflip.watch.recorder import make_recording_env
from speedflip.watch.run import watch_match

THREE = [-1.0, 0.0, 1.0]


@pytest.fixture(scope="module")
def custom_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("watch-runs") / "custom1v1"
    cfg = build_config(
        {
            "env": {"num_arenas": 2, "action_table": {"steer": THREE, "torque": THREE}},
            "ppo": {"num_steps": 8, "minibatch_size": 16, "policy_layers": [16], "critic_layers": [16]},
            "run": {"seed": 3, "device": "cpu", "collector": "inprocess", "num_threads": 1, "torch_threads": 1,
                    "tensorboard": False},
        }
    )  # fmt: skip
    trainer = Trainer(cfg)
    try:
        batch, raw_obs, _ = trainer.collect()
        trainer.update(batch, raw_obs)
        trainer.save(run / "checkpoints")
    finally:
        trainer.close()
    return run


def test_recording_env_uses_the_runs_table(custom_run: Path) -> None:
    env = make_recording_env(1, 2.0, obs_options=training_obs_options(str(custom_run)))
    try:
        np.testing.assert_array_equal(env.actions.table, build_table(THREE, THREE, THREE))
    finally:
        env.close()


@pytest.mark.parametrize("opponent", ["rule", "idle"])
def test_watch_a_custom_table_run(custom_run: Path, opponent: str) -> None:
    replay = watch_match(str(custom_run), opponent, team_size=1, seconds=2.0, seed=1)
    assert replay.num_frames > 10 and np.isfinite(replay.cars).all()
