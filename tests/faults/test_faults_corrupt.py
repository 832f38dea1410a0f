"""Truncated, bit-flipped, edited and missing checkpoint files: resume skips them, names them, never loads them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from faults_helpers import (
    INTERVAL,
    checkpoint_dirs,
    flip_byte,
    independently_good,
    resumed_from,
    run_train,
    tree_hashes,
    truncate,
)


def _edit_meta_digit(path: Path) -> None:
    """Change global_step in meta.json by one: still valid JSON, only meta.json's own checksum can tell."""
    text = (path / "meta.json").read_text()
    step = json.loads(text)["global_step"]
    path.joinpath("meta.json").write_text(text.replace(f'"global_step": {step}', f'"global_step": {step + 1}'))


DAMAGE = {  # checkpoint index (0 = newest) -> (damage, file named in the message, reason in the message)
    0: (lambda p: truncate(p / "model.safetensors"), "model.safetensors", "does not match its checksum"),
    1: (lambda p: flip_byte(p / "optimizer.safetensors"), "optimizer.safetensors", "does not match its checksum"),
    2: (_edit_meta_digit, "meta.json", "does not match its checksum"),
    3: (lambda p: (p / "state.safetensors").unlink(), "state.safetensors", "is missing"),
    4: (lambda p: truncate(p / "meta.json"), "meta.json", "is corrupt"),
}


def test_damaged_checkpoints_are_skipped_named_and_never_loaded(tmp_path: Path) -> None:
    run = tmp_path / "run"
    keep = ["--set", "run.keep_checkpoints=6"]
    first = run_train(run, 6 * INTERVAL, *keep)
    assert first.returncode == 0, first.output
    folders = checkpoint_dirs(run)
    assert [int(p.name) for p in folders] == [INTERVAL * k for k in range(6, 0, -1)]
    oldest = folders[-1]
    for index, (damage, _, _) in DAMAGE.items():
        damage(folders[index])
        assert not independently_good(folders[index]) or index == 2
    backup = tmp_path / "oldest-backup"
    shutil.copytree(oldest, backup)

    # every checkpoint damaged: a clear refusal (exit 2) and the run directory is not touched
    flip_byte(oldest / "model.safetensors", offset=-2)
    before = tree_hashes(run)
    refused = run_train(run, 6 * INTERVAL, *keep)
    assert refused.returncode == 2, refused.output
    assert "Traceback" not in refused.output
    assert "none can be loaded" in refused.stderr and "--new" in refused.stderr
    assert tree_hashes(run) == before

    # the oldest one repaired: resume skips the five damaged ones, says which file and why, loads the oldest
    shutil.rmtree(oldest)
    shutil.copytree(backup, oldest)
    resumed = run_train(run, 7 * INTERVAL, *keep)
    assert resumed.returncode == 0, resumed.output
    assert "Traceback" not in resumed.output
    assert resumed_from(resumed.stdout) == oldest
    skipped = [line for line in resumed.stdout.splitlines() if line.startswith("skipped checkpoint")]
    assert len(skipped) == len(DAMAGE), resumed.stdout
    for index, (_, name, reason) in DAMAGE.items():
        line = next(s for s in skipped if f"{folders[index]}:" in s)
        assert name in line and reason in line, line
    # the damaged folders are kept for inspection (as .corrupt-* once a new save reaches their step)
    kept = sorted((run / "checkpoints").glob(".corrupt-*"))
    assert len(kept) == len(DAMAGE)
    assert all(independently_good(p) for p in checkpoint_dirs(run))
    assert int(checkpoint_dirs(run)[0].name) == 7 * INTERVAL
