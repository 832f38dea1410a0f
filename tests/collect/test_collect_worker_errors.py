"""An exception raised by a worker's own code stops the collector at once with the worker's message.

It is deterministic (a replacement would raise it again), so it is not restarted like a crash, and
the message is the worker's own, without the advice about memory a restart limit gives. Workers and
the parent build the same lookup table; a worker with another table is refused at start.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from speedflip.collect import multiprocess as mp_mod
from speedflip.collect.multiprocess import (
    CollectorError,
    MultiProcessVecEnv,
    WorkerFailedError,
    WorkerRaisedError,
    WorkerRestartLimitError,
)
from speedflip.config import EnvConfig
from speedflip.env.actions import LookupTableAction, default_lookup_table
from speedflip.env.vec_env import RocketLeagueVecEnv, StepResult

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses fork and /dev/shm"),
    pytest.mark.timeout(90),
]

CUSTOM = {"steer": [-1.0, 0.0, 1.0], "torque": [-1.0, 0.0, 1.0]}


def shm_exists(name: str) -> bool:
    return Path("/dev/shm", name.lstrip("/")).exists()


def test_a_disagreeing_table_is_the_workers_own_error_not_a_restart() -> None:
    """The bug report, reproduced: the parent believes in the default 90-row table, the workers act
    with the run's 81-row table. Index 83 passes the parent's check and the worker raises."""
    env = MultiProcessVecEnv(EnvConfig(num_arenas=4, action_table=CUSTOM), seed=0, num_workers=2, timeout=20.0)
    name = env.shm_name
    try:
        assert env.num_actions == 81  # fixed: the parent builds the run's table too
        env.reset()
        env.actions = LookupTableAction(default_lookup_table())  # what the parent used to do
        with pytest.raises(WorkerRaisedError) as caught:
            env.step(np.full(env.num_agents, 83))
        error = caught.value
        assert isinstance(error, WorkerFailedError) and isinstance(error, CollectorError)
        assert not isinstance(error, WorkerRestartLimitError)
        message = str(error)
        assert re.match(r"collector worker [01] \(arenas [02]\.\.[13], pid \d+\) raised ActionError", message)
        assert "raised ActionError: action index 83 for agent 0 is out of range: valid indices are 0..80" in message
        assert "(during 'step', at actions.py:" in message  # where the worker raised it
        assert "memory" not in message.lower() and "dmesg" not in message
        assert error.exc_type == "ActionError" and "valid indices are 0..80" in error.exc_message
        assert "Traceback" in error.worker_traceback and "Traceback" not in message
        assert env.worker_restarts == 0
        assert env.pids == [] and not shm_exists(name)
    finally:
        env.close()


def _raise_on_step(self: RocketLeagueVecEnv, actions: Any, custom_controls: Any = None) -> StepResult:
    if self.arena_offset == 2:  # worker 1 only
        raise ValueError("the reward of arena 2 is not defined here")
    return ORIGINAL_STEP(self, actions, custom_controls)


def _memory_error_on_step(self: RocketLeagueVecEnv, actions: Any, custom_controls: Any = None) -> StepResult:
    if self.arena_offset == 2 and self.seed == 0:  # the first worker 1 only (its replacement has another seed)
        raise MemoryError("cannot allocate")
    return ORIGINAL_STEP(self, actions, custom_controls)


ORIGINAL_STEP = RocketLeagueVecEnv.step


def test_worker_whose_env_raises_on_step_stops_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # fork: the workers inherit the patched env class
    monkeypatch.setattr(RocketLeagueVecEnv, "step", _raise_on_step)
    env = MultiProcessVecEnv(EnvConfig(num_arenas=4), seed=0, num_workers=2, start_method="fork", timeout=20.0)
    try:
        env.reset()
        with pytest.raises(WorkerRaisedError) as caught:
            env.step(np.zeros(env.num_agents, np.int64))
        message = str(caught.value)
        assert message.startswith("collector worker 1 (arenas 2..3, pid ")
        assert "raised ValueError: the reward of arena 2 is not defined here" in message
        assert "test_collect_worker_errors.py" in message  # where it was raised
        assert "memory" not in message.lower()
        assert env.worker_restarts == 0  # max_worker_restarts=5, but nothing was restarted
        assert env.pids == []
    finally:
        env.close()


def test_a_memory_error_is_restarted_like_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RocketLeagueVecEnv, "step", _memory_error_on_step)
    env = MultiProcessVecEnv(EnvConfig(num_arenas=4), seed=0, num_workers=2, start_method="fork", timeout=20.0)
    try:
        env.reset()
        result = env.step(np.zeros(env.num_agents, np.int64))
        assert env.worker_restarts == 1 and "raised MemoryError" in env.last_restart_reason
        assert result.truncated[4:].all()  # worker 1's rows were cut at their new reset
        env.step(np.zeros(env.num_agents, np.int64))
    finally:
        env.close()
    assert "MemoryError" in mp_mod.RESTARTABLE_WORKER_EXCEPTIONS


def test_worker_with_another_table_is_refused_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers report their table's size and fingerprint; the parent compares it with its own."""
    monkeypatch.setattr(mp_mod, "table_digest", lambda table: "not-the-workers")
    with pytest.raises(CollectorError, match=r"acts with another lookup table \(81 rows"):
        MultiProcessVecEnv(EnvConfig(num_arenas=2, action_table=CUSTOM), seed=0, num_workers=2, timeout=20.0)
