"""Helpers for the tests in this folder (imported as a module: tiny configs, fake checkpoints, hashes)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch

from speedflip.checkpoint import Checkpoint
from speedflip.config import Config, build_config

COMPAT: dict[str, Any] = {"obs_dim": 103, "num_actions": 90, "policy_layers": [16], "critic_layers": [16]}


def tiny_config(**sections: dict[str, Any]) -> Config:
    """A 2-arena 1v1 config with 16-unit networks, 8 steps and minibatch 16, CPU, one thread (updates too)."""
    data: dict[str, Any] = {
        "env": {"num_arenas": 2, "blue_size": 1, "orange_size": 1},
        "ppo": {"num_steps": 8, "minibatch_size": 16, "policy_layers": [16], "critic_layers": [16]},
        "run": {
            "seed": 7,
            "device": "cpu",
            "collector": "inprocess",
            "num_threads": 1,
            "torch_threads": 1,
            "update_torch_threads": 1,
            "tensorboard": False,
        },
    }
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    return build_config(data)


def fake_checkpoint(value: float = 1.0, compat: dict[str, Any] | None = None) -> Checkpoint:
    """A small, well-formed checkpoint (no Trainer needed) for the file-handling tests."""
    return Checkpoint(
        model={"policy.0.weight": torch.full((4, 3), value), "policy.0.bias": torch.zeros(4)},
        optimizer_tensors={"0.exp_avg": torch.full((4, 3), value / 2), "0.step": torch.tensor(3.0)},
        optimizer_meta={"param_groups": [{"lr": 0.001, "params": [0]}], "scalars": {}},
        state_tensors={"obs_rms.mean": torch.arange(3, dtype=torch.float64)},
        meta={"compat": dict(COMPAT if compat is None else compat), "iteration": 1},
    )


def tree_hashes(root: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of every file below ``root`` (directories as 'dir'); the run-dir lock file
    (``.lock``: who is training there, no run data) is left out."""
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        if p.name == ".lock":
            continue
        rel = str(p.relative_to(root))
        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
    return out


def flip_byte(path: Path, offset: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    i = len(data) // 2 if offset is None else offset
    data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
