"""Worker supervision: a collection worker that dies or hangs is replaced and the run goes on.

Real RocketSim, 4 arenas over 2 workers (worker 0: arenas 0..1, worker 1: arenas 2..3).
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
    CollectorTimeoutError,
    MultiProcessVecEnv,
    WorkerFailedError,
    WorkerRestartLimitError,
    restart_seed,
)
from speedflip.config import EnvConfig
from speedflip.env.vec_env import RocketLeagueVecEnv, StepResult
from speedflip.errors import RunStoppedError

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses POSIX signals and /dev/shm"),
    pytest.mark.timeout(90),
]

SEED = 3


def started(
    timeout: float = 20.0, max_worker_restarts: int = 5, restart_window_seconds: float = 600.0
) -> MultiProcessVecEnv:
    env = MultiProcessVecEnv(
        EnvConfig(num_arenas=4),
        seed=SEED,
        num_workers=2,
        timeout=timeout,
        max_worker_restarts=max_worker_restarts,
        restart_window_seconds=restart_window_seconds,
    )
    env.reset()
    return env


def kill(env: MultiProcessVecEnv, worker: int, sig: int = signal.SIGKILL) -> int:
    pid = env.pids[worker]
    assert pid is not None
    os.kill(pid, sig)
    if sig == signal.SIGKILL:
        # wait until it is gone, so the next call certainly meets a dead worker
        deadline = time.monotonic() + 5.0
        while env._res.procs[worker].is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
    return pid


def rows(env: MultiProcessVecEnv, worker: int) -> slice:
    a, b = env.arena_slices[worker]
    return slice(a * env.num_cars, b * env.num_cars)


def zeros(env: MultiProcessVecEnv) -> np.ndarray:
    return np.zeros(env.num_agents, np.int64)


def assert_valid(env: MultiProcessVecEnv, result: StepResult) -> None:
    assert result.obs.shape == (env.num_agents, env.obs_dim)
    assert result.final_obs.shape == (env.num_agents, env.obs_dim)
    assert result.rewards.shape == result.terminated.shape == result.truncated.shape == (env.num_agents,)
    assert np.isfinite(result.obs).all() and np.isfinite(result.rewards).all()


def assert_restarted(env: MultiProcessVecEnv, result: StepResult, worker: int) -> None:
    """The worker's rows are cut at their fresh reset observations; no episode record is made up."""
    r = rows(env, worker)
    assert result.truncated[r].all() and not result.terminated[r].any()
    assert np.array_equal(result.final_obs[r], result.obs[r])
    assert (result.rewards[r] == 0).all()
    assert result.goal_team is not None
    a, b = env.arena_slices[worker]
    assert (result.goal_team[a:b] == -1).all()
    others_done = sum(
        bool(result.terminated[k * env.num_cars] or result.truncated[k * env.num_cars])
        for k in range(env.num_arenas)
        if not a <= k < b
    )
    assert len(result.episodes) == others_done


def test_killed_worker_is_restarted_and_stepping_goes_on() -> None:
    env = started()
    try:
        for _ in range(5):
            env.step(zeros(env))
        touches, seconds = env.total_touches, env.total_agent_seconds
        old_pid = kill(env, 1)
        result = env.step(zeros(env))
        assert_valid(env, result)
        assert_restarted(env, result, 1)
        assert env.worker_restarts == 1
        assert f"pid {old_pid}" in env.last_restart_reason
        assert "arenas 2..3" in env.last_restart_reason and "signal 9" in env.last_restart_reason
        assert env.pids[1] not in (None, old_pid)
        # the replacement's arenas start from the resets of its derived seed (reproducible)
        fresh = RocketLeagueVecEnv(EnvConfig(num_arenas=2), seed=restart_seed(SEED, 1), arena_offset=2)
        try:
            assert np.array_equal(result.obs[rows(env, 1)], fresh.reset())
        finally:
            fresh.close()
        # totals never go back, and the run goes on
        assert env.total_touches >= touches and env.total_agent_seconds > seconds
        rng = np.random.default_rng(0)
        for _ in range(150):
            result = env.step(rng.integers(0, env.num_actions, env.num_agents))
            assert_valid(env, result)
        assert env.worker_restarts == 1
        assert env.total_agent_seconds > seconds
        assert len(env.get_rng_state()["arenas"]) == env.num_arenas
    finally:
        env.close()


def test_worker_killed_between_step_async_and_step_wait() -> None:
    env = started()
    try:
        env.step(zeros(env))
        # stopped first, so the worker cannot finish this step before it dies (a race under load)
        kill(env, 0, signal.SIGSTOP)
        env.step_async(zeros(env))
        kill(env, 0)
        result = env.step_wait()
        assert_valid(env, result)
        assert_restarted(env, result, 0)
        assert env.worker_restarts == 1
        assert_valid(env, env.step(zeros(env)))
    finally:
        env.close()


def test_hung_worker_is_killed_and_replaced() -> None:
    env = started(timeout=1.5)
    try:
        env.step(zeros(env))
        old_pid = kill(env, 0, signal.SIGSTOP)
        begin = time.monotonic()
        result = env.step(zeros(env))
        assert time.monotonic() - begin < 10.0
        assert_valid(env, result)
        assert_restarted(env, result, 0)
        assert env.worker_restarts == 1
        assert "silent for 1.5 s" in env.last_restart_reason and f"pid {old_pid}" in env.last_restart_reason
        with pytest.raises(ProcessLookupError):
            os.kill(old_pid, 0)  # killed and reaped
        for _ in range(20):
            assert_valid(env, env.step(zeros(env)))
    finally:
        env.close()


def test_restart_limit_stops_the_run_with_the_fix() -> None:
    env = started(max_worker_restarts=1)
    name = env.shm_name
    try:
        kill(env, 1)
        env.step(zeros(env))
        assert env.worker_restarts == 1
        kill(env, 1)
        with pytest.raises(WorkerRestartLimitError) as caught:
            env.step(zeros(env))
        assert isinstance(caught.value, RunStoppedError)
        message = str(caught.value)
        assert "failed 2 times within 600 s" in message
        assert "run.max_worker_restarts = 1" in message
        assert "signal 9" in message  # the last cause
        assert "speedflip doctor" in message and "run.collector=inprocess" in message
        assert env.pids == []
        assert not Path("/dev/shm", name.lstrip("/")).exists()
    finally:
        env.close()


def test_restarts_outside_the_window_do_not_count() -> None:
    env = started(max_worker_restarts=1, restart_window_seconds=0.3)
    try:
        kill(env, 1)
        env.step(zeros(env))
        time.sleep(0.4)
        kill(env, 1)
        assert_restarted(env, env.step(zeros(env)), 1)
        assert env.worker_restarts == 2
    finally:
        env.close()


def test_no_restarts_keeps_the_old_errors() -> None:
    env = started(max_worker_restarts=0)
    try:
        kill(env, 1)
        with pytest.raises(
            WorkerFailedError, match=r"collector worker 1 \(pid \d+, arenas 2\.\.3\) died.*signal 9"
        ) as e:
            env.step(zeros(env))
        assert not isinstance(e.value, WorkerRestartLimitError)
        assert env.pids == []
    finally:
        env.close()
    env = started(timeout=1.0, max_worker_restarts=0)
    pid = kill(env, 0, signal.SIGSTOP)
    try:
        with pytest.raises(CollectorTimeoutError, match=r"collector worker 0 .* did not answer 'step' within 1 s"):
            env.step(zeros(env))
    finally:
        if env.pids:
            os.kill(pid, signal.SIGCONT)
        env.close()


def test_other_workers_trajectories_are_unaffected() -> None:
    """Worker 0's arenas continue exactly as in a run without the fault."""
    cfg = EnvConfig(num_arenas=4, timeout_seconds=2.0, no_touch_timeout_seconds=1.0)
    reference = RocketLeagueVecEnv(cfg, seed=SEED, num_threads=1)
    env = MultiProcessVecEnv(cfg, seed=SEED, num_workers=2, timeout=20.0)
    try:
        assert np.array_equal(reference.reset(), env.reset())
        r = rows(env, 0)
        rng = np.random.default_rng(1)
        for t in range(60):
            if t == 10:
                kill(env, 1)
            actions = rng.integers(0, env.num_actions, env.num_agents)
            a, b = reference.step(actions), env.step(actions)
            for name in ("obs", "rewards", "terminated", "truncated", "final_obs"):
                assert np.array_equal(getattr(a, name)[r], getattr(b, name)[r]), f"step {t}: {name} differs"
            if t == 10:
                assert_restarted(env, b, 1)
        assert env.worker_restarts == 1
    finally:
        reference.close()
        env.close()


def test_worker_lost_during_another_command_resets_at_the_next_step() -> None:
    env = started()
    try:
        env.step(zeros(env))
        kill(env, 1)
        env.set_reward_weights({"touch": 1.0})
        assert env.worker_restarts == 1
        state = env.get_rng_state()
        assert len(state["arenas"]) == env.num_arenas
        result = env.step(zeros(env))
        assert_restarted(env, result, 1)
        assert not result.truncated[rows(env, 0)].any()
        assert_valid(env, env.step(zeros(env)))
    finally:
        env.close()


def test_bad_caller_data_is_not_restarted() -> None:
    """A worker's exception about the caller's data would repeat: it raises, with the traceback."""
    env = started()
    try:
        with pytest.raises(WorkerFailedError, match=r"(?s)ValueError: unknown RNG state format"):
            env.set_rng_state({"format": "not-a-format"})
        assert env.worker_restarts == 0
        assert env.pids == []
    finally:
        env.close()


def test_crashed_worker_is_restarted() -> None:
    """A segfault (here: the signal a crash sends) is a failure like any other."""
    env = started()
    try:
        kill(env, 0, signal.SIGSEGV)
        result = env.step(zeros(env))
        assert_restarted(env, result, 0)
        assert env.worker_restarts == 1 and "signal 11" in env.last_restart_reason
    finally:
        env.close()


def test_replacement_that_cannot_start_counts_towards_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    env = started(max_worker_restarts=2)
    try:

        def no_fork(index: int, seed: int) -> None:
            raise OSError(12, "Cannot allocate memory")

        monkeypatch.setattr(env, "_spawn", no_fork)
        kill(env, 1)
        with pytest.raises(WorkerRestartLimitError, match=r"(?s)failed 3 times.*could not start a replacement.*memory"):
            env.step(zeros(env))
        assert env.worker_restarts == 2
        assert env.pids == []
    finally:
        env.close()
