"""lock_run_dir: one speedflip process per run directory; a lock left by a killed process never blocks."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from speedflip.train.rundir import LOCK_NAME, RunDirError, lock_run_dir, prepare_run_dir

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="no fcntl: lock_run_dir does not lock on Windows")

COMPAT = {"obs_dim": 3}

HOLDER = """
import sys, time
from pathlib import Path
from speedflip.train.rundir import lock_run_dir
with lock_run_dir(Path(sys.argv[1])):
    print("locked", flush=True)
    time.sleep(120)
"""


@pytest.fixture(scope="module")
def holder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """Another process holding the lock of a run directory (shared: starting Python + torch takes ~2 s)."""
    run = tmp_path_factory.mktemp("held") / "run"
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "locked", "the child process did not take the lock"
        yield child, run
    finally:
        child.kill()
        child.wait(timeout=10)


def test_lock_held_by_another_process_is_refused_naming_it(holder: tuple[subprocess.Popen[str], Path]) -> None:
    child, run = holder
    assert child.poll() is None, "the holder has exited already"
    with pytest.raises(RunDirError) as info, lock_run_dir(run):
        pytest.fail("entered a run directory another process holds")
    message = str(info.value)
    assert f"run directory '{run.resolve()}' is in use by another speedflip process" in message
    assert f"pid {child.pid} on host {socket.gethostname()}, started " in message
    assert "lock_run_dir" in message  # the holder's command line (python -c '...')
    assert "Stop that one first, or pick another --run-dir." in message


def test_lock_of_a_killed_process_does_not_block(holder: tuple[subprocess.Popen[str], Path]) -> None:
    child, run = holder
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    assert json.loads((run / LOCK_NAME).read_text())["pid"] == child.pid  # its lock file is still there
    with lock_run_dir(run):
        assert json.loads((run / LOCK_NAME).read_text())["pid"] == os.getpid()


def test_same_process_can_lock_again_after_leaving(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for _ in range(2):
        with lock_run_dir(run):
            details = json.loads((run / LOCK_NAME).read_text())
            assert (details["pid"], details["host"]) == (os.getpid(), socket.gethostname())
            assert details["started"] and details["cmdline"]


def test_second_lock_in_the_same_process_is_refused(tmp_path: Path) -> None:
    with lock_run_dir(tmp_path), pytest.raises(RunDirError, match=f"pid {os.getpid()} on host"), lock_run_dir(tmp_path):
        pass


def test_lock_file_is_not_a_checkpoint_and_not_a_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with lock_run_dir(run):
        plan = prepare_run_dir(run, COMPAT, new=True)  # only the lock file there: nothing to archive
        assert plan.checkpoint is None and plan.archived_to is None and plan.skipped == []
        assert plan.leftovers == []


def test_new_archives_the_run_and_keeps_the_lock_held_in_the_fresh_folder(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with lock_run_dir(run):
        (run / "metrics.jsonl").write_text("{}\n")
        plan = prepare_run_dir(run, COMPAT, new=True)
        assert plan.archived_to is not None
        assert (plan.archived_to / "metrics.jsonl").exists() and not (plan.archived_to / LOCK_NAME).exists()
        assert json.loads((run / LOCK_NAME).read_text())["pid"] == os.getpid()
        with pytest.raises(RunDirError, match="in use by another speedflip process"), lock_run_dir(run):
            pass  # still held: the lock file moved back is the one this process locked
    with lock_run_dir(run):
        pass


def test_new_refuses_when_another_process_took_the_fresh_folder(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with lock_run_dir(run):
        (run / "metrics.jsonl").write_text("{}\n")
        real_rename = Path.rename

        def rename_then_intrude(self: Path, target: Path) -> Path:
            moved = real_rename(self, target)
            run.mkdir()
            (run / LOCK_NAME).write_text("{}")  # another process started in the fresh folder meanwhile
            return moved

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(Path, "rename", rename_then_intrude)
            with pytest.raises(RunDirError, match="another speedflip process started in"):
                prepare_run_dir(run, COMPAT, new=True)
