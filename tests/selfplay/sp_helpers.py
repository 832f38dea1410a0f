"""Helpers for the self-play tests (imported as a module): tiny configs and a tiny trained checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from speedflip.config import Config, build_config
from speedflip.train.trainer import Trainer


def tiny_data(**sections: dict[str, Any]) -> dict[str, Any]:
    """A 2-arena 1v1 config dict with 16-unit networks, 8 steps and minibatch 16, CPU, one thread."""
    data: dict[str, Any] = {
        "env": {"num_arenas": 2, "blue_size": 1, "orange_size": 1},
        "ppo": {"num_steps": 8, "minibatch_size": 16, "policy_layers": [16], "critic_layers": [16]},
        "run": {
            "seed": 3,
            "device": "cpu",
            "collector": "inprocess",
            "num_threads": 1,
            "torch_threads": 1,
            "tensorboard": False,
        },
    }
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    return data


def tiny_config(**sections: dict[str, Any]) -> Config:
    return build_config(tiny_data(**sections))


def train_tiny_run(run_dir: Path, team_size: int = 1, algo: str = "ppo", **sections: dict[str, Any]) -> Path:
    """One collect + update of a tiny ``team_size`` v ``team_size`` run of ``algo`` with ``sections`` merged into
    its config; saved to run_dir/checkpoints (the checkpoint's path is returned)."""
    env = {"blue_size": team_size, "orange_size": team_size, **sections.pop("env", {})}
    trainer = Trainer(build_config({**tiny_data(env=env, **sections), "algo": algo}))
    try:
        batch, raw_obs, _ = trainer.collect()
        trainer.update(batch, raw_obs)
        return trainer.save(run_dir / "checkpoints")
    finally:
        trainer.close()
