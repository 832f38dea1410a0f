"""A checkpoint written before the trainer redesign (commit a0bfdd6) still loads and resumes.

The fixture (``fixtures/pre_redesign_checkpoint/``, see its README) was written by the old code with the
overrides in :data:`OVERRIDES`. The stored values are read here with ``safetensors`` and ``json`` directly,
not through speedflip's loader, and compared with what the current :class:`Trainer` holds after ``load``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from speedflip.config import Config, resolve_config
from speedflip.train.trainer import Trainer

FIXTURE = Path(__file__).parent / "fixtures" / "pre_redesign_checkpoint"

# the overrides of the quick preset the old code was run with (its README has the full command)
OVERRIDES = [
    "run.checkpoint_interval_steps=64", "env.num_arenas=2", "ppo.num_steps=16", "ppo.minibatch_size=32",
    "ppo.policy_layers=[16]", "ppo.critic_layers=[16]", "selfplay.snapshot_interval_steps=1000000000",
    "run.milestone_replays=false", "run.tensorboard=false", "run.seed=3", "run.collector=inprocess",
    "run.num_threads=1", "run.torch_threads=1", "run.device=cpu",
]  # fmt: skip


def config(total_steps: int) -> Config:
    return resolve_config("quick", None, [*OVERRIDES, f"run.total_steps={total_steps}"])


def stored_meta() -> dict[str, object]:
    meta: dict[str, object] = json.loads((FIXTURE / "meta.json").read_text())
    return meta


def test_the_fixture_is_the_old_codes() -> None:
    meta = stored_meta()
    assert meta["git_commit"] == "a0bfdd6"
    assert (meta["global_step"], meta["iteration"]) == (128, 2)
    assert sum(p.stat().st_size for p in FIXTURE.iterdir()) < 100_000


def test_the_current_trainer_loads_it_and_trains_on(tmp_path: Path) -> None:
    meta = stored_meta()
    model = load_file(FIXTURE / "model.safetensors")
    state = load_file(FIXTURE / "state.safetensors")
    trainer = Trainer(config(total_steps=10_000), tmp_path / "run")
    try:
        trainer.load(FIXTURE)
        assert trainer.global_step == 128
        assert trainer.iteration == 2
        loaded = trainer.model.state_dict()
        assert loaded.keys() == model.keys()
        for name, tensor in model.items():
            torch.testing.assert_close(loaded[name], tensor, rtol=0, atol=0, msg=name)
        rms = trainer.obs_rms
        np.testing.assert_array_equal(rms.mean, state["obs_rms.mean"].numpy())
        np.testing.assert_array_equal(rms.var, state["obs_rms.var"].numpy())
        assert rms.count == float(state["obs_rms.count"].reshape(()))
        assert rms.count > 1  # the old run did fold observations into it
        assert trainer.env.get_rng_state() == meta["numpy_rng"]

        batch, raw_obs, stats = trainer.collect()
        metrics = trainer.update(batch, raw_obs)
        assert stats.steps == 16 * 4  # num_steps x 4 agents
        assert trainer.global_step == 128 + 64
        assert trainer.iteration == 3
        assert all(math.isfinite(v) for v in metrics.values()), metrics
        assert any(not torch.equal(trainer.model.state_dict()[k], v) for k, v in model.items())
    finally:
        trainer.close()


def test_speedflip_train_resumes_from_it(tmp_path: Path) -> None:
    steps = 192  # one more iteration of 64 agent steps
    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE, run_dir / "checkpoints" / "128", ignore=shutil.ignore_patterns("README.md"))
    argv = [sys.executable, "-m", "speedflip.cli", "train", "--preset", "quick", "--run-dir", str(run_dir)]
    for override in [*OVERRIDES, f"run.total_steps={steps}"]:
        argv += ["--set", override]
    env = {**os.environ, "COLUMNS": "400", "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    (row,) = [line for line in out.splitlines() if "resumed from" in line]
    assert str(run_dir.resolve() / "checkpoints" / "128") in row, out
    assert "skipped checkpoint" not in out
    assert "fresh start" not in out
    saved = json.loads((run_dir / "checkpoints" / str(steps) / "meta.json").read_text())
    assert (saved["global_step"], saved["iteration"]) == (steps, 3)
