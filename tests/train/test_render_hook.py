"""`speedflip train --render`: the live-view hook runs after every env step; without RLViser it says so and trains."""

from __future__ import annotations

import itertools
from pathlib import Path

from rich.console import Console

from speedflip.config import build_config
from speedflip.train.run import train
from speedflip.train.trainer import Trainer

TINY = {
    "env": {"num_arenas": 2},
    "ppo": {"num_steps": 8, "minibatch_size": 16, "policy_layers": [8], "critic_layers": [8]},
    "run": {"total_steps": 64, "tensorboard": False, "milestone_replays": False},
}


def test_step_hook_runs_once_per_env_step() -> None:
    trainer = Trainer(build_config(TINY))
    calls: list[int] = []
    trainer.step_hook = lambda: calls.append(trainer.env.arenas.arenas[0].tick_count)  # type: ignore[union-attr]
    try:
        trainer.collect()
    finally:
        trainer.close()
    assert len(calls) == 8  # ppo.num_steps
    assert all(b - a == 8 for a, b in itertools.pairwise(calls))  # one tick-skip apart


def test_render_without_rlviser_trains_on(tmp_path: Path) -> None:
    console = Console(record=True, width=200)
    code = train(build_config(TINY), tmp_path / "run", console=console, render=True)
    text = console.export_text()
    assert code == 0
    assert "RLViser not running: --render disabled, training continues" in text
    assert (tmp_path / "run" / "checkpoints").is_dir()
