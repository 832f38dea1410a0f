"""End to end through the real CLI: a tiny training run, resuming it, and --new."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

TINY = [
    "--set", "env.num_arenas=2",
    "--set", "ppo.num_steps=16",
    "--set", "ppo.minibatch_size=64",
    "--set", "run.checkpoint_interval_steps=128",
    "--set", "ppo.policy_layers=[16]",
    "--set", "ppo.critic_layers=[16]",
    "--set", "run.collector=inprocess",
    "--set", "run.device=cpu",
]  # fmt: skip
STEPS_PER_ITERATION = 2 * 2 * 16  # 2 arenas x 2 cars (quick is 1v1) x 16 steps


def _train(run_dir: Path, total_steps: int, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable, "-m", "speedflip.cli", "train", "--preset", "quick", "--run-dir", str(run_dir),
        *TINY, "--set", f"run.total_steps={total_steps}", *extra,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    out = subprocess.run(cmd, cwd=run_dir.parent, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    return out


def _metrics(run_dir: Path) -> list[dict[str, object]]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _steps(run_dir: Path) -> list[int]:
    return sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())


def test_train_resume_and_new(tmp_path: Path) -> None:
    run = tmp_path / "run"

    # ---- a fresh run: 256 steps = 4 iterations of 64
    out = _train(run, 256)
    records = _metrics(run)
    assert [r["global_step"] for r in records] == [64, 128, 192, 256]
    for r in records:
        assert isinstance(r["sps"], float) and r["sps"] > 0
        assert r["iteration"] == int(r["global_step"]) // STEPS_PER_ITERATION  # type: ignore[call-overload]
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["env"]["num_arenas"] == 2 and config["ppo"]["policy_layers"] == [16]
    assert config["run"]["total_steps"] == 256
    assert _steps(run) == [128, 256]  # every 128 steps; the final save at 256 is that same checkpoint
    meta = json.loads((run / "checkpoints" / "256" / "meta.json").read_text())
    assert meta["global_step"] == 256 and meta["iteration"] == 4
    assert list((run / "tb").glob("events.out.tfevents.*"))
    assert "fresh start" in out.stdout
    assert not list((run / "checkpoints").glob(".tmp-*"))

    # ---- the same command with a larger budget resumes from 256
    out = _train(run, 384)
    records = _metrics(run)
    assert [r["global_step"] for r in records] == [64, 128, 192, 256, 320, 384]
    assert [r["iteration"] for r in records[4:]] == [5, 6]
    assert _steps(run) == [128, 256, 384]
    assert "resumed from" in out.stdout and "fresh start" not in out.stdout
    assert yaml.safe_load((run / "config.yaml").read_text())["run"]["total_steps"] == 384

    # ---- running it again once the budget is reached trains nothing and says so
    out = _train(run, 384)
    assert len(_metrics(run)) == 6
    assert "already complete" in out.stdout

    # ---- --new moves the old run aside (kept intact) and starts from 0
    old_files = {str(p.relative_to(run)): p.read_bytes() for p in run.rglob("*") if p.is_file()}
    _train(run, 128, "--new")
    archived = [p for p in tmp_path.iterdir() if p.name.startswith("run-archived-")]
    assert len(archived) == 1
    kept = {str(p.relative_to(archived[0])): p.read_bytes() for p in archived[0].rglob("*") if p.is_file()}
    assert kept == old_files
    assert [r["global_step"] for r in _metrics(run)] == [64, 128]
    assert _steps(run) == [128]
