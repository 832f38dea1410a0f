"""The command line on bad input: exit code 2 and one short paragraph on stderr, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from speedflip.checkpoint import Checkpoint, save_checkpoint

QUICK_COMPAT = {"obs_dim": 103, "num_actions": 90, "policy_layers": [256, 256], "critic_layers": [256, 256]}


def _checkpoint(compat: dict[str, object]) -> Checkpoint:
    return Checkpoint(
        model={"w": torch.ones(3)},
        optimizer_tensors={"0.exp_avg": torch.zeros(3)},
        optimizer_meta={"param_groups": [], "scalars": {}},
        state_tensors={"x": torch.zeros(1)},
        meta={"compat": compat, "iteration": 1},
    )


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _bad_yaml(tmp: Path) -> list[str]:
    (tmp / "bad.yaml").write_text("env:\n  num_arenas: 4\n   tick_skip: 8\n")
    return ["train", "--preset", "quick", "--config", str(tmp / "bad.yaml"), "--run-dir", str(tmp / "run")]


def _incompatible(tmp: Path) -> list[str]:
    save_checkpoint(tmp / "run" / "checkpoints", 500, _checkpoint({**QUICK_COMPAT, "critic_layers": [64]}), 3)
    return ["train", "--preset", "quick", "--run-dir", str(tmp / "run")]


def _all_corrupt(tmp: Path) -> list[str]:
    for step in (100, 200):
        path = save_checkpoint(tmp / "run" / "checkpoints", step, _checkpoint(QUICK_COMPAT), 3)
        _flip(path / "model.safetensors")
    return ["train", "--preset", "quick", "--run-dir", str(tmp / "run")]


def _args(*args: str) -> Callable[[Path], list[str]]:
    return lambda tmp: [*args, "--run-dir", str(tmp / "run")]


# name -> (command builder, words the message must contain)
CASES: dict[str, tuple[Callable[[Path], list[str]], list[str]]] = {
    "unknown-preset": (
        _args("train", "--preset", "quik"),
        ["unknown preset 'quik'", "Available presets: 1v1,", "quick"],
    ),
    "malformed-yaml": (_bad_yaml, ["not valid YAML", "line 3"]),
    "missing-config-file": (_args("train", "--config", "nope.yaml"), ["nope.yaml", "does not exist"]),
    "unknown-key": (_args("train", "--set", "ppo.lerning_rate=1e-3"), ["ppo.lerning_rate", "ppo.learning_rate"]),
    "wrong-type": (_args("train", "--set", "ppo.learning_rate=abc"), ["ppo.learning_rate", "'abc'"]),
    "out-of-range": (_args("train", "--set", "env.tick_skip=0"), ["env.tick_skip", "bad value 0"]),
    "bad-set-syntax": (_args("train", "--set", "ppo.learning_rate"), ["key=value"]),
    "incompatible-run-dir": (_incompatible, ["different setup", "critic_layers", "--new"]),
    "all-checkpoints-corrupt": (_all_corrupt, ["none can be loaded", "model.safetensors", "--new"]),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str, str, dict[str, bytes]]]:
    """Run every case at once (each is a separate process; together they take one start-up time)."""
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    procs = {}
    for name, (build, _) in CASES.items():
        tmp = tmp_path_factory.mktemp(name)
        cmd = [sys.executable, "-m", "speedflip.cli", *build(tmp)]
        before = _snapshot(tmp)
        proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs[name] = (proc, tmp, before)
    out = {}
    for name, (proc, tmp, before) in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert _snapshot(tmp) == before, f"{name}: files changed"
        out[name] = (proc.returncode, stdout, stderr, before)
    return out


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", list(CASES))
def test_user_error_exits_2_with_one_paragraph(
    results: dict[str, tuple[int, str, str, dict[str, bytes]]], name: str
) -> None:
    code, stdout, stderr, _ = results[name]
    assert code == 2, stderr
    assert "Traceback" not in stdout + stderr
    assert stderr.startswith("error: ")
    message = stderr.strip()
    assert "\n\n" not in message  # one paragraph
    flat = " ".join(message.split())  # rich wraps long lines at the console width
    for words in CASES[name][1]:
        assert " ".join(words.split()) in flat, (words, flat)
    assert stdout == ""


def test_failed_start_keeps_checkpoints(results: dict[str, tuple[int, str, str, dict[str, bytes]]]) -> None:
    # the fixture already compared the files before/after; make sure there were checkpoints to compare
    for name in ("incompatible-run-dir", "all-checkpoints-corrupt"):
        files = results[name][3]
        assert any(f.endswith("model.safetensors") for f in files), name


def test_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "speedflip.cli", "--version"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and out.stdout.startswith("speedflip ")
