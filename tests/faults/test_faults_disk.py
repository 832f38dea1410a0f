"""Disk full during a save: earlier checkpoints intact, no half-written folder, a clean stop with the cause."""

from __future__ import annotations

import errno
import io
import os
import resource
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from faults_helpers import (
    INTERVAL,
    checkpoint_dirs,
    independently_good,
    metric_records,
    run_train,
    tiny_config,
    tmp_folders,
    tree_hashes,
)
from rich.console import Console

from speedflip import checkpoint as ckpt_module
from speedflip.checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from speedflip.train.metrics import JsonlSink
from speedflip.train.run import train


def _checkpoint(value: float = 1.0) -> Checkpoint:
    return Checkpoint(
        model={"w": torch.full((64, 64), value)},
        optimizer_tensors={"0.exp_avg": torch.zeros(64, 64), "0.step": torch.tensor(3.0)},
        optimizer_meta={"param_groups": [{"lr": 0.001, "params": [0]}], "scalars": {}},
        state_tensors={"obs_rms.mean": torch.zeros(3, dtype=torch.float64)},
        meta={"iteration": 1},
    )


def _enospc(*_: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("fail_at", [1, 3, 5], ids=["first-file", "third-file", "meta"])
def test_write_failure_in_process_keeps_earlier_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: int
) -> None:
    save_checkpoint(tmp_path, 100, _checkpoint(1.0), keep=2)
    save_checkpoint(tmp_path, 200, _checkpoint(2.0), keep=2)
    before = tree_hashes(tmp_path)
    calls = {"n": 0}
    real_fsync = os.fsync

    def failing_fsync(fd: int) -> None:
        calls["n"] += 1
        if calls["n"] == fail_at:
            _enospc()
        real_fsync(fd)

    monkeypatch.setattr(ckpt_module.os, "fsync", failing_fsync)
    with pytest.raises(CheckpointError) as info:
        save_checkpoint(tmp_path, 300, _checkpoint(3.0), keep=2)
    monkeypatch.undo()
    message = str(info.value)
    assert "the disk is full" in message and str(tmp_path / "300") in message
    assert "--run-dir" in message and "intact" in message
    assert tree_hashes(tmp_path) == before  # nothing new, nothing rotated away, no .tmp-* left
    assert torch.equal(load_checkpoint(tmp_path / "200").model["w"], torch.full((64, 64), 2.0))


def test_nan_or_inf_is_never_saved(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, 100, _checkpoint(1.0), keep=3)
    before = tree_hashes(tmp_path)
    for bad in (float("nan"), float("inf")):
        ckpt = _checkpoint(1.0)
        ckpt.model["w"][3, 5] = bad
        with pytest.raises(CheckpointError, match=r"refusing to save NaN/Inf: model tensor 'w'"):
            save_checkpoint(tmp_path, 200, ckpt, keep=3)
    ckpt = _checkpoint(1.0)
    ckpt.optimizer_tensors["0.exp_avg"][0, 0] = float("nan")
    with pytest.raises(CheckpointError, match=r"optimizer tensor '0.exp_avg'"):
        save_checkpoint(tmp_path, 200, ckpt, keep=3)
    assert tree_hashes(tmp_path) == before


def test_train_stops_cleanly_when_a_save_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In process: the 2nd checkpoint save hits ENOSPC; train returns 1, says why, closes its metrics file."""
    run = tmp_path / "run"
    writes = {"n": 0}
    real_write = ckpt_module._write_synced

    def write(path: Path, data: bytes) -> None:
        writes["n"] += 1
        if writes["n"] == 6:  # 5 files per checkpoint: the first file of the second save
            _enospc()
        real_write(path, data)

    closed: list[Path] = []
    real_close = JsonlSink.close

    def close(self: JsonlSink) -> None:
        closed.append(self.path)
        real_close(self)

    monkeypatch.setattr(ckpt_module, "_write_synced", write)
    monkeypatch.setattr(JsonlSink, "close", close)
    out = io.StringIO()
    code = train(tiny_config(10 * INTERVAL), run, console=Console(file=out, width=300))
    err = capsys.readouterr().err
    assert code == 1, out.getvalue() + err
    assert "the disk is full" in err and str(run / "checkpoints" / str(2 * INTERVAL)) in err
    assert f"Training stopped at {2 * INTERVAL:,} agent steps" in err
    assert closed == [run / "metrics.jsonl"]
    assert [p.name for p in checkpoint_dirs(run)] == [str(INTERVAL)]
    assert independently_good(checkpoint_dirs(run)[0]) and tmp_folders(run) == []


def _fsize_limit(limit: int) -> None:
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_file_size_limit_during_a_save_subprocess(tmp_path: Path) -> None:
    """RLIMIT_FSIZE (works without privileges): the trainer's writes past 30 kB fail with EFBIG."""
    run = tmp_path / "run"
    first = run_train(run, 2 * INTERVAL)
    assert first.returncode == 0, first.output
    before = {p.name: tree_hashes(p) for p in checkpoint_dirs(run)}
    assert sorted(before) == [str(INTERVAL), str(2 * INTERVAL)]
    limited = run_train(run, 4 * INTERVAL, preexec_fn=lambda: _fsize_limit(30_000))
    assert limited.returncode == 1, limited.output
    assert "Traceback" not in limited.output
    assert "file-size limit" in limited.stderr and str(run / "checkpoints" / str(3 * INTERVAL)) in limited.stderr
    assert "--run-dir" in limited.stderr
    assert {p.name: tree_hashes(p) for p in checkpoint_dirs(run)} == before
    assert tmp_folders(run) == []
    assert max(r["global_step"] for r in metric_records(run)) == 3 * INTERVAL  # it trained, then stopped


_IN_NAMESPACE = """
set -e
mount -t tmpfs -o size="$SF_SIZE" tmpfs "$SF_MNT"
cp -a "$SF_IN/." "$SF_MNT/"
set +e
"$@"
rc=$?
rm -rf "$SF_OUT"
mkdir -p "$SF_OUT"
cp -a "$SF_MNT/." "$SF_OUT/"
exit $rc
"""


def _unshare_available() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt || mount -t tmpfs tmpfs /tmp"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


def test_real_full_filesystem_subprocess(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 320 kB tmpfs (mounted in a private user+mount namespace) fills up during the 3rd or 4th save."""
    if not _unshare_available():
        pytest.skip("cannot mount a tmpfs in a user namespace here (unshare -rm); RLIMIT_FSIZE test covers it")
    mnt, empty, full, freed = (tmp_path / name for name in ("mnt", "empty", "full", "freed"))
    for folder in (mnt, empty):
        folder.mkdir()
    run = mnt / "run"
    wrapper = ["unshare", "-rm", "sh", "-c", _IN_NAMESPACE, "sh"]
    monkeypatch.setenv("SF_MNT", str(mnt))
    monkeypatch.setenv("SF_SIZE", "320k")
    monkeypatch.setenv("SF_IN", str(empty))
    monkeypatch.setenv("SF_OUT", str(full))
    filled = run_train(run, 40 * INTERVAL, wrapper=wrapper)
    assert filled.returncode == 1, filled.output
    assert "Traceback" not in filled.output
    assert "the disk is full" in filled.stderr and "--run-dir" in filled.stderr, filled.stderr
    saved = checkpoint_dirs(full / "run")
    assert saved and all(independently_good(p) for p in saved)
    assert tmp_folders(full / "run") == []
    newest = int(saved[0].name)
    assert max(r["global_step"] for r in metric_records(full / "run")) > newest  # the lost save's steps

    # space freed (a larger disk): the same command resumes from the newest checkpoint and finishes
    monkeypatch.setenv("SF_SIZE", "8m")
    monkeypatch.setenv("SF_IN", str(full))
    monkeypatch.setenv("SF_OUT", str(freed))
    resumed = run_train(run, newest + 2 * INTERVAL, wrapper=wrapper)
    assert resumed.returncode == 0, resumed.output
    assert f"{run}/checkpoints/{newest}" in resumed.stdout
    assert int(checkpoint_dirs(freed / "run")[0].name) == newest + 2 * INTERVAL
