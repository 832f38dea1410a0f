"""A collector worker that fails is reported with its error, quickly, and never hangs the parent.

These run without supervision (``max_worker_restarts=0``); restarts: test_collect_supervision.py.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from speedflip.collect.multiprocess import (
    CollectorError,
    CollectorTimeoutError,
    MultiProcessVecEnv,
    WorkerFailedError,
)
from speedflip.config import EnvConfig
from speedflip.env.actions import ActionError

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses POSIX signals and /dev/shm")


def shm_exists(name: str) -> bool:
    return Path("/dev/shm", name.lstrip("/")).exists()


def started(num_arenas: int = 4, workers: int = 2, timeout: float = 20.0) -> MultiProcessVecEnv:
    """A collector without supervision (max_worker_restarts=0): the first failure raises."""
    env = MultiProcessVecEnv(
        EnvConfig(num_arenas=num_arenas), seed=0, num_workers=workers, timeout=timeout, max_worker_restarts=0
    )
    env.reset()
    return env


@linux_only
@pytest.mark.timeout(60)
def test_killed_worker_is_named_with_its_signal() -> None:
    env = started()
    name = env.shm_name
    pid = env.pids[1]
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    begin = time.monotonic()
    with pytest.raises(WorkerFailedError, match=r"collector worker 1 \(pid \d+, arenas 2\.\.3\) died.*signal 9"):
        env.step(np.zeros(env.num_agents, np.int64))
    assert time.monotonic() - begin < 10.0
    assert not shm_exists(name), "shared memory must be freed after a failure"
    with pytest.raises(CollectorError, match="closed"):
        env.step(np.zeros(env.num_agents, np.int64))
    env.close()  # idempotent


@linux_only
@pytest.mark.timeout(60)
def test_stuck_worker_times_out_with_its_name() -> None:
    env = started(timeout=1.0)
    pid = env.pids[0]
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        begin = time.monotonic()
        with pytest.raises(CollectorTimeoutError, match=r"collector worker 0 .* did not answer 'step' within 1 s"):
            env.step(np.zeros(env.num_agents, np.int64))
        assert time.monotonic() - begin < 10.0
    finally:
        if env.pids:
            os.kill(pid, signal.SIGCONT)
        env.close()
    assert env.pids == []  # every worker is gone


@pytest.mark.timeout(60)
def test_worker_exception_is_reported_with_its_traceback(tmp_path: Path) -> None:
    """A worker that raises (here: no collision meshes) sends its error; the parent raises it."""
    cfg = EnvConfig(num_arenas=2, meshes_dir=str(tmp_path / "missing"))
    with pytest.raises(WorkerFailedError, match=r"(?s)collector worker \d \(arenas .*SimSetupError.*meshes"):
        MultiProcessVecEnv(cfg, num_workers=2, timeout=20.0)


@pytest.mark.timeout(60)
def test_bad_actions_are_rejected_in_the_parent() -> None:
    env = started(num_arenas=2, workers=1)
    try:
        with pytest.raises(ActionError, match="out of range"):
            env.step(np.full(env.num_agents, 999))
        env.step(np.zeros(env.num_agents, np.int64))  # still usable
    finally:
        env.close()


@linux_only
@pytest.mark.timeout(60)
def test_close_frees_everything() -> None:
    env = started()
    name, pids = env.shm_name, [p for p in env.pids if p is not None]
    assert shm_exists(name)
    env.close()
    assert not shm_exists(name)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.timeout(60)
def test_exception_inside_a_running_worker_is_reported() -> None:
    env = started(num_arenas=2, workers=2)
    try:
        with pytest.raises(WorkerFailedError, match=r"(?s)collector worker \d .*ValueError: unknown RNG state format"):
            env.set_rng_state({"format": "not-a-format"})
        assert env.pids == []
    finally:
        env.close()
