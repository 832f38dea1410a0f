"""A collection worker killed mid-run: restarted and the run goes on; past the restart limit the run
saves its last good state and stops with exit 1 and a message naming the worker."""

from __future__ import annotations

import importlib
import os
import signal
from pathlib import Path

import pytest
from faults_helpers import BIG, Trainer, checkpoint_dirs, independently_good, worker_pids

# quick kickstarts from the rule bot, which reads the arena state worker processes keep: off for these runs
MULTIPROCESS = ["--set", "run.collector=multiprocess", "--set", "run.num_workers=2", "--set", "ppo.kickstart_coef=0"]


@pytest.fixture(autouse=True)
def _needs_worker_restart() -> None:
    module = importlib.import_module("speedflip.collect.multiprocess")
    if getattr(module, "WorkerRestartLimitError", None) is None:
        pytest.skip("worker restart not available")


def _kill_a_worker(proc: Trainer) -> int:
    proc.wait_for(lambda: len(proc.new_records()) >= 2, what="2 iterations")
    workers = worker_pids(proc.proc.pid)
    assert len(workers) >= 2, f"expected 2 collection workers below {proc.proc.pid}, found {workers}"
    for pid in workers:  # a short-lived child (e.g. a git call for checkpoint metadata) may be gone already
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        return pid
    raise AssertionError(f"every listed worker {workers} had exited before the kill")


def test_killed_worker_is_restarted_and_training_continues(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = Trainer(run, BIG, *MULTIPROCESS)
    victim = _kill_a_worker(proc)
    after = len(proc.new_records())
    proc.wait_for(lambda: len(proc.new_records()) >= after + 4, what="4 more iterations after the kill")
    assert victim not in worker_pids(proc.proc.pid)
    proc.signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0, proc.output
    assert "Traceback" not in proc.output
    restarts = [r for r in proc.new_records() if any("worker_restarts" in k for k in r)]
    if restarts:  # logged by the trainer when it reports restarts
        key = next(k for k in restarts[-1] if "worker_restarts" in k)
        assert restarts[-1][key] >= 1
    newest = checkpoint_dirs(run)[0]
    assert independently_good(newest) and int(newest.name) == proc.new_records()[-1]["global_step"]


def test_worker_restart_limit_saves_and_exits_1(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = Trainer(run, BIG, *MULTIPROCESS, "--set", "run.max_worker_restarts=1")
    first = _kill_a_worker(proc)
    proc.wait_for(
        lambda: len(worker_pids(proc.proc.pid)) >= 2 and first not in worker_pids(proc.proc.pid),
        what="the worker to be restarted",
    )
    after = len(proc.new_records())
    proc.wait_for(lambda: len(proc.new_records()) > after, what="an iteration after the restart")
    os.kill(worker_pids(proc.proc.pid)[0], signal.SIGKILL)  # the second failure: over the limit of 1
    assert proc.wait(timeout=90) == 1, proc.output
    assert "Traceback" not in proc.output
    assert "error:" in proc.output and "worker" in proc.output.lower()
    # the state is saved, or (collector gone) the message names the newest checkpoint on disk
    assert "the last good state is saved in" in proc.output or "The newest checkpoint on disk is" in proc.output
    newest = checkpoint_dirs(run)[0]
    assert independently_good(newest) and f"checkpoints/{newest.name}" in proc.output
