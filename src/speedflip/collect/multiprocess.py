"""The multi-process collector: worker processes own the arenas, shared memory carries the data.

Each worker runs a :class:`~speedflip.env.vec_env.RocketLeagueVecEnv` over a contiguous slice of the
arena pool (physics, observations, rewards, done flags, resets) and writes its results into one
preallocated shared-memory block; the parent writes the actions there and does one batched policy
forward for every agent. Per step the only messages are one command byte to each worker and one
reply byte back: no arrays are pickled and no sockets carry data.

It has the same interface as ``RocketLeagueVecEnv`` and, given the same seed and actions, returns
exactly the same trajectories (each arena draws its resets from its own seeded stream).

Failures are never a hang: every wait watches the worker processes' sentinels and has a timeout
(the watchdog). A worker that raises sends a report of its exception (type, message, where, traceback)
before exiting; a worker that dies (killed, segfault) is seen by its exit code; a worker that does
not answer within ``timeout`` seconds is hung.

An exception raised by the worker's own code (the environment rejects an action, a setting is
invalid, a bug) is deterministic: a replacement would raise it again. It is never restarted: the
collector shuts down and raises :class:`WorkerRaisedError` with the worker's own message, e.g.
``collector worker 0 (arenas 0..1, pid 123) raised ActionError: action index 83 ...``. Only a
``MemoryError`` (:data:`RESTARTABLE_WORKER_EXCEPTIONS`) counts as a failure like a crash.

Every worker builds its lookup table from the same config as the parent (:func:`table_for`) and
reports its size and fingerprint at start; a worker with another table stops the collector at once.

Supervision: a worker that dies (killed, segfault) or hangs is replaced. A hung one
is sent SIGTERM, then SIGKILL after a short grace; the replacement gets the same arena slice, a
reset seed derived from the run's seed and the restart count (:func:`restart_seed`), the current
reward weights and mechanics switch, and reuses the slice of shared memory (safe: a process sent
SIGKILL never runs another instruction of its own). Its arenas are reset and the call in progress
completes: in the step's result the restarted rows hold their fresh reset observations, are
``truncated`` (not terminated) with ``final_obs`` equal to those observations and zero reward, and
produce no finished-episode records. :attr:`MultiProcessVecEnv.worker_restarts` counts restarts
(callers discard a rollout during which it changed) and
:attr:`MultiProcessVecEnv.last_restart_reason` says why the last one happened. More than
``max_worker_restarts`` restarts within ``restart_window_seconds`` raise
:class:`WorkerRestartLimitError`; with ``max_worker_restarts=0`` the first failure raises
:class:`WorkerFailedError` or :class:`CollectorTimeoutError`. Either way the collector shuts down
its workers and frees the shared memory before raising.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import multiprocessing as mp
import os
import sys
import time
import types
import weakref
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from multiprocessing import shared_memory
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, NoReturn

import numpy as np

from speedflip._types import Array
from speedflip.collect.shared import COUNTER_FIELDS, EPISODE_FIELDS, Layout, SharedArrays, make_layout
from speedflip.collect.worker import (
    CMD_ATTACH,
    CMD_CLOSE,
    CMD_GET_RNG,
    CMD_RESET,
    CMD_SET_MECHANICS,
    CMD_SET_REWARDS,
    CMD_SET_RNG,
    CMD_STEP,
    REPLY_ERROR,
    THREAD_ENV_VARS,
    WorkerSpec,
    worker_main,
)
from speedflip.config import EnvConfig
from speedflip.env.action_forms import table_for
from speedflip.env.actions import table_digest
from speedflip.env.arenas import GameArrays
from speedflip.env.vec_env import StepResult
from speedflip.errors import RunStoppedError

# modules the fork server loads once so that each forked worker starts in milliseconds
WORKER_PRELOAD = ("speedflip.collect.worker", "speedflip.env.vec_env")


class CollectorError(RuntimeError):
    """A collector worker failed; the message names the worker and says what happened."""


class WorkerFailedError(CollectorError):
    """A worker raised an exception or died."""


class WorkerRaisedError(WorkerFailedError):
    """The worker's own code raised an exception (not a crash): deterministic, so never restarted.

    The message is the worker's: ``collector worker 0 (arenas 0..1, pid 123) raised ActionError:
    action index 83 ...`` with where it was raised; :attr:`exc_type`, :attr:`exc_message` and
    :attr:`worker_traceback` hold the parts.
    """

    def __init__(self, message: str, exc_type: str = "", exc_message: str = "", worker_traceback: str = "") -> None:
        super().__init__(message)
        self.exc_type = exc_type
        self.exc_message = exc_message
        self.worker_traceback = worker_traceback


# exceptions raised in a worker that are treated like a crash (restarted): running out of memory may
# pass; anything else raised by the worker's code would be raised again by its replacement
RESTARTABLE_WORKER_EXCEPTIONS = frozenset({"MemoryError"})


class CollectorTimeoutError(CollectorError):
    """A worker did not answer in time (stuck, or the machine is badly overloaded)."""


class WorkerRestartLimitError(CollectorError, RunStoppedError):
    """Workers failed more often than ``max_worker_restarts`` allows within ``restart_window_seconds``.

    The message says how many restarts in what window, the last cause and what to do about it.
    """


# seconds a hung worker gets to exit after SIGTERM before it is sent SIGKILL
KILL_GRACE_SECONDS = 0.5


def restart_seed(seed: int, restart: int) -> int:
    """The reset seed of the worker started by the ``restart``-th restart (counted from 1) of a
    collector seeded with ``seed``: reproducible, and independent of the run's other streams."""
    return int(np.random.SeedSequence([seed, restart]).generate_state(1, np.uint32)[0])


@dataclass
class _Failure:
    """One worker that failed during a command (not yet acted on)."""

    index: int
    error: CollectorError  # what is raised when the failure is not restarted (the pre-supervision message)
    reason: str  # one line for last_restart_reason and the restart-limit message
    restartable: bool = True  # False: a worker's exception about the caller's data (restarting repeats it)


def default_start_method() -> str:
    """``forkserver`` on Linux (safe with the parent's torch and physics threads, quick to start),
    ``spawn`` elsewhere (Windows has nothing else; macOS' fork is unsafe with system frameworks)."""
    if sys.platform.startswith("linux") and "forkserver" in mp.get_all_start_methods():
        return "forkserver"
    return "spawn"


def _context(method: str) -> mp.context.SpawnContext | mp.context.ForkServerContext | mp.context.ForkContext:
    if method == "spawn":
        return mp.get_context("spawn")
    if method == "forkserver":
        return mp.get_context("forkserver")
    if method == "fork":
        return mp.get_context("fork")
    raise ValueError(f"unknown start method {method!r}; use 'spawn', 'forkserver' or 'fork'")


@contextlib.contextmanager
def _thread_env(threads: int) -> Iterator[None]:
    """Set the BLAS/OpenMP thread variables while workers start, so a new interpreter (spawn, or the
    forkserver) reads them before it imports numpy; restore the parent's values afterwards."""
    saved = {var: os.environ.get(var) for var in THREAD_ENV_VARS}
    for var in THREAD_ENV_VARS:
        os.environ[var] = str(threads)
    try:
        yield
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


@dataclass
class _Resources:
    """What must be released when the collector goes away (shared with its finalizer)."""

    procs: list[BaseProcess] = field(default_factory=list)
    conns: list[Connection] = field(default_factory=list)
    shm: shared_memory.SharedMemory | None = None
    orphans: list[BaseProcess] = field(default_factory=list)  # replaced workers sent SIGKILL, not yet reaped


@contextlib.contextmanager
def _bare_main_module() -> Iterator[None]:
    """Start workers without re-importing the parent's ``__main__``.

    ``spawn`` and ``forkserver`` children normally import the parent's main script first (so that
    pickled functions defined there resolve). Workers only run :func:`worker_main`, and the main
    script of the CLI imports torch: ~1 s and ~180 MB per worker for nothing. While workers start,
    ``sys.modules["__main__"]`` is an empty module, which tells multiprocessing there is no main
    script to prepare; it is restored right after.
    """
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


def _shutdown(res: _Resources) -> None:
    """Stop workers (politely, then by force) and free the shared memory. Safe to call twice."""
    for proc, conn in zip(res.procs, res.conns, strict=False):
        if proc.is_alive():
            with contextlib.suppress(OSError):
                conn.send_bytes(CMD_CLOSE)
    deadline = time.monotonic() + 2.0
    for proc in res.procs:
        proc.join(timeout=max(0.0, deadline - time.monotonic()))
    for proc in res.procs:
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=1.0)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=2.0)
    for proc in res.orphans:
        proc.join(timeout=1.0)
    for conn in res.conns:
        conn.close()
    res.procs.clear()
    res.conns.clear()
    res.orphans.clear()
    if res.shm is not None:
        with contextlib.suppress(FileNotFoundError):
            res.shm.unlink()
        with contextlib.suppress(BufferError):
            res.shm.close()
        res.shm = None


class MultiProcessVecEnv:
    """``num_workers`` processes, each owning a contiguous share of ``cfg.num_arenas`` arenas.

    Args:
        cfg: the environment; ``cfg.num_arenas`` is the total over all workers.
        seed: reset seed (arena ``k`` uses the stream ``[seed, k]``, as the in-process env does).
        num_workers: worker processes (at most one per arena).
        threads_per_worker: physics threads inside each worker.
        start_method: ``"spawn"``, ``"forkserver"`` or ``"fork"``; default :func:`default_start_method`.
        timeout: seconds a worker may stay silent during a step (or any command) before it is
            declared hung (``run.worker_timeout_seconds``).
        start_timeout: seconds the workers may take to start and build their arenas.
        max_worker_restarts: restarts of failed workers allowed within ``restart_window_seconds``;
            one more raises :class:`WorkerRestartLimitError`. 0: the first failure raises
            :class:`WorkerFailedError` or :class:`CollectorTimeoutError` (``run.max_worker_restarts``).
        restart_window_seconds: the window of ``max_worker_restarts`` (``run.restart_window_seconds``).
        arena_offset: the global index of this collector's first arena (its reset streams and seeds), for a
            collector that is one group of a larger pool (:class:`~speedflip.collect.pipelined.PipelinedVecEnv`).

    Attributes:
        worker_restarts: workers restarted so far (all causes, all workers).
        last_restart_reason: why the last restart happened (worker, pid, arenas, exit code, signal
            or silence), "" before the first.
    """

    def __init__(
        self,
        cfg: EnvConfig,
        seed: int = 0,
        num_workers: int = 2,
        threads_per_worker: int = 1,
        start_method: str | None = None,
        timeout: float = 60.0,
        start_timeout: float = 120.0,
        max_worker_restarts: int = 5,
        restart_window_seconds: float = 600.0,
        arena_offset: int = 0,
    ) -> None:
        if num_workers < 1:
            raise ValueError("num_workers must be at least 1")
        if threads_per_worker < 1:
            raise ValueError("threads_per_worker must be at least 1")
        if max_worker_restarts < 0:
            raise ValueError("max_worker_restarts must be >= 0")
        if restart_window_seconds <= 0:
            raise ValueError("restart_window_seconds must be > 0")
        if arena_offset < 0:
            raise ValueError("arena_offset must be >= 0")
        self.cfg = cfg
        self.seed = seed
        self.arena_offset = arena_offset
        self.timeout = timeout
        self.start_method = start_method or default_start_method()
        self.num_arenas = cfg.num_arenas
        self.num_cars = cfg.num_cars
        self.num_agents = self.num_arenas * self.num_cars
        self.num_workers = min(num_workers, self.num_arenas)
        self.threads_per_worker = threads_per_worker
        self.start_timeout = start_timeout
        self.max_worker_restarts = max_worker_restarts
        self.restart_window_seconds = restart_window_seconds
        self.worker_restarts = 0
        self.last_restart_reason = ""
        self.car_teams = np.array([0] * cfg.blue_size + [1] * cfg.orange_size, dtype=np.int64)
        # the table built exactly as every worker builds it (the workers check it in their hello)
        self.actions = table_for(cfg)
        self.table_sha256 = table_digest(self.actions.table)
        self.num_actions = self.actions.num_actions
        bounds = np.linspace(0, self.num_arenas, self.num_workers + 1).astype(int)
        self.arena_slices = [(int(a), int(b)) for a, b in itertools.pairwise(bounds)]
        self._arena_weights = np.array([b - a for a, b in self.arena_slices], np.float64)
        # filled in by _start from what the workers report
        self.obs_dim = 0
        self.reward_names: list[str] = []
        self.shm_name = ""  # the shared block's name (for diagnostics)
        self._buf: SharedArrays | None = None
        self._layout: Layout = []
        self._closed = False
        self._started = False  # supervision starts once every worker is up and attached
        self._stepping = False  # a step_async awaits its step_wait
        # supervision state
        self._restart_times: deque[float] = deque()  # monotonic times of the restarts in the window
        self._counter_base = np.zeros((self.num_workers, len(COUNTER_FIELDS)), np.float64)  # replaced workers' totals
        self._reward_weights: dict[str, float] | None = None  # replayed to a restarted worker
        self._mechanics_active: bool | None = None  # likewise
        self._needs_reset: set[int] = set()  # restarted during another command: reset at the next step
        self._step_resets: set[int] = set()  # workers the pending step_async told to reset instead
        self._send_failures: dict[int, _Failure] = {}  # workers the pending step_async could not reach
        self._res = _Resources()
        self._finalizer = weakref.finalize(self, _shutdown, self._res)
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ lifecycle
    def _start(self) -> None:
        """Start the workers; each builds its arenas and reports its observation size, then the
        parent sizes the shared block from that and tells every worker where it is."""
        for index in range(len(self.arena_slices)):
            self._spawn(index, self.seed)
        hellos = [json.loads(reply.decode()) for reply in self._wait_all(self.start_timeout, "start")]
        self.obs_dim = int(hellos[0]["obs_dim"])
        self.reward_names = [str(name) for name in hellos[0]["reward_names"]]
        for index, hello in enumerate(hellos):
            self._check_hello(index, hello)
        layout, size = make_layout(
            self.num_agents, self.obs_dim, self.num_arenas, self.num_workers, len(self.reward_names)
        )
        shm = shared_memory.SharedMemory(create=True, size=size)
        self._res.shm = shm
        self.shm_name = shm.name
        self._layout = layout
        self._buf = SharedArrays.view(shm, layout)
        self._command(self._attach_message(), "attach")
        self._started = True

    def _spawn(self, index: int, seed: int) -> None:
        """Start the worker for slice ``index`` (a new one, or the replacement of a stopped one)."""
        ctx = _context(self.start_method)
        if isinstance(ctx, mp.context.ForkServerContext):
            # The fork server imports only what a worker needs (numpy, RocketSim, the env), not the
            # parent's __main__ (which may pull in torch: ~180 MB per worker); workers fork from it.
            # This has no effect if this process' fork server is already running.
            ctx.set_forkserver_preload(list(WORKER_PRELOAD))
        a, b = self.arena_slices[index]
        spec = WorkerSpec(
            index=index,
            env_cfg=self.cfg.model_copy(update={"num_arenas": b - a}),
            seed=seed,
            arena_start=a,
            arena_stop=b,
            arena_offset=self.arena_offset,
            agent_start=a * self.num_cars,
            agent_stop=b * self.num_cars,
            num_threads=self.threads_per_worker,
        )
        with _thread_env(1), _bare_main_module():
            parent_end, child_end = ctx.Pipe(duplex=True)
            proc = ctx.Process(
                target=worker_main, args=(spec, child_end), name=f"speedflip-collector-{index}", daemon=True
            )
            try:
                proc.start()
            except BaseException:
                parent_end.close()
                raise
            finally:
                child_end.close()
        if index < len(self._res.procs):
            self._res.procs[index] = proc
            self._res.conns[index] = parent_end
        else:
            self._res.procs.append(proc)
            self._res.conns.append(parent_end)

    def _check_hello(self, index: int, hello: dict[str, Any]) -> None:
        if int(hello["obs_dim"]) != self.obs_dim:
            self._fail(
                CollectorError(
                    f"{self._describe_worker(index)} builds observations of size {hello['obs_dim']}, "
                    f"the collector's are of size {self.obs_dim}"
                )
            )
        if hello.get("num_actions") != self.num_actions or hello.get("table_sha256") != self.table_sha256:
            self._fail(
                CollectorError(
                    f"{self._describe_worker(index)} acts with another lookup table ({hello.get('num_actions')} "
                    f"rows, fingerprint {hello.get('table_sha256')}) than the collector ({self.num_actions} rows, "
                    f"fingerprint {self.table_sha256}); both must build it from env.action_table"
                )
            )

    def _attach_message(self) -> bytes:
        return CMD_ATTACH + json.dumps({"name": self.shm_name, "layout": self._layout}).encode()

    @property
    def pids(self) -> list[int | None]:
        """Process ids of the workers (for diagnostics and memory accounting)."""
        return [proc.pid for proc in self._res.procs]

    def close(self) -> None:
        """Stop the workers and free the shared memory (idempotent)."""
        self._closed = True
        self._buf = None
        self._finalizer()

    def __enter__(self) -> MultiProcessVecEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ messaging
    def _describe_worker(self, index: int) -> str:
        a, b = self.arena_slices[index]
        pid = self._res.procs[index].pid if index < len(self._res.procs) else None
        return f"collector worker {index} (pid {pid}, arenas {a}..{b - 1})"

    def _fail(self, error: CollectorError) -> NoReturn:
        self.close()
        raise error

    def _failed(self, failure: _Failure) -> _Failure:
        """Raise the failure's error (and shut down) unless it will be handled by a restart."""
        if not self._started or self.max_worker_restarts == 0 or not failure.restartable:
            self._fail(failure.error)
        return failure

    def _send(self, index: int, message: bytes, what: str) -> _Failure | None:
        try:
            self._res.conns[index].send_bytes(message)
        except OSError:
            return self._failed(self._death(index, what))
        return None

    def _wait_all(self, timeout: float, what: str, errors_restartable: bool = False) -> list[bytes]:
        """Wait for one reply from every worker, without restarts (used while starting)."""
        replies, failures = self._gather(range(len(self._res.conns)), timeout, what, errors_restartable)
        assert not failures  # not started: every failure raised
        return [replies[i] for i in range(len(self._res.conns))]

    def _gather(
        self, indices: Iterable[int], timeout: float, what: str, errors_restartable: bool
    ) -> tuple[dict[int, bytes], dict[int, _Failure]]:
        """Wait for one reply from each worker in ``indices``; a dead or silent worker never hangs it.

        Returns the replies and the failures to restart; failures that are not restarted raise.
        """
        if self._closed:
            raise CollectorError("the collector is closed")
        replies: dict[int, bytes] = {}
        failures: dict[int, _Failure] = {}
        pending = set(indices)
        deadline = time.monotonic() + timeout
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                names = ", ".join(self._describe_worker(i) for i in sorted(pending))
                error = CollectorTimeoutError(
                    f"{names} did not answer '{what}' within {timeout:g} s "
                    "(stuck, or the machine is overloaded); the collector was shut down"
                )
                for index in sorted(pending):
                    reason = f"{self._describe_worker(index)} was silent for {timeout:g} s during '{what}'"
                    failures[index] = self._failed(_Failure(index, error, reason))
                break
            conns = {self._res.conns[i]: i for i in pending}
            sentinels = {self._res.procs[i].sentinel: i for i in pending}
            ready = wait([*conns, *sentinels], timeout=remaining)
            for obj in ready:
                if isinstance(obj, Connection):
                    index = conns[obj]
                    outcome = self._receive(index, what, errors_restartable)
                    if isinstance(outcome, _Failure):
                        failures[index] = outcome
                    else:
                        replies[index] = outcome
                    pending.discard(index)
            for obj in ready:
                if isinstance(obj, int) and sentinels[obj] in pending:
                    index = sentinels[obj]
                    pending.discard(index)
                    if self._res.conns[index].poll():
                        outcome = self._receive(index, what, errors_restartable)  # its last words, or a late reply
                    else:
                        outcome = self._failed(self._death(index, what))
                    if isinstance(outcome, _Failure):
                        failures[index] = outcome
                    else:
                        replies[index] = outcome
        return replies, failures

    def _death(self, index: int, what: str) -> _Failure:
        proc = self._res.procs[index]
        proc.join(timeout=1.0)
        code = proc.exitcode
        if code is None:
            status = "closed its pipe but is still running"
        elif code < 0:
            status = f"died with exit code {code} (killed by signal {-code})"
        else:
            status = f"died with exit code {code}"
        reason = f"{self._describe_worker(index)} {status} during '{what}'"
        return _Failure(index, WorkerFailedError(f"{reason}; the collector was shut down"), reason)

    def _receive(self, index: int, what: str, errors_restartable: bool) -> bytes | _Failure:
        try:
            reply = self._res.conns[index].recv_bytes()
        except (EOFError, OSError):
            return self._failed(self._death(index, what))
        if reply[:1] == REPLY_ERROR:
            error = self._raised(index, what, reply[1:])
            reason = f"{self._describe_worker(index)} raised {error.exc_type} during '{what}': {error.exc_message}"
            restartable = errors_restartable and error.exc_type in RESTARTABLE_WORKER_EXCEPTIONS
            return self._failed(_Failure(index, error, reason, restartable=restartable))
        return reply[1:]

    def _raised(self, index: int, what: str, payload: bytes) -> WorkerRaisedError:
        """The error for a worker's exception report (see :func:`speedflip.collect.worker.error_report`)."""
        try:
            report = json.loads(payload.decode("utf-8", "replace"))
            exc_type, message = str(report["type"]), str(report["message"])
            where, tb = str(report.get("where", "")), str(report.get("traceback", ""))
        except (ValueError, KeyError, TypeError):
            text = payload.decode("utf-8", "replace")
            lines = [line for line in text.splitlines() if line.strip()]
            exc_type, message, where, tb = "Exception", lines[-1] if lines else "?", "", text
        a, b = self.arena_slices[index]
        pid = self._res.procs[index].pid if index < len(self._res.procs) else None
        at = f", at {where}" if where else ""
        text = (
            f"collector worker {index} (arenas {a}..{b - 1}, pid {pid}) raised {exc_type}: {message} "
            f"(during '{what}'{at}). An error raised by the environment code repeats, so the worker was not "
            "restarted and the collector was shut down"
        )
        return WorkerRaisedError(text, exc_type, message, tb)

    def _ask(
        self, index: int, message: bytes | None, timeout: float, what: str, errors_restartable: bool
    ) -> bytes | _Failure:
        """Send ``message`` (if any) to one worker and wait for its reply (or its failure)."""
        if message is not None:
            failure = self._send(index, message, what)
            if failure is not None:
                return failure
        replies, failures = self._gather([index], timeout, what, errors_restartable)
        return failures[index] if failures else replies[index]

    def _command(self, message: bytes, what: str, errors_restartable: bool = False) -> list[bytes]:
        """Send ``message`` to every worker and return their replies, restarting workers that fail."""
        if self._stepping:
            raise CollectorError(f"'{what}' while a step_async is pending: call step_wait first")
        failures: dict[int, _Failure] = {}
        for index in range(len(self._res.conns)):
            failure = self._send(index, message, what)
            if failure is not None:
                failures[index] = failure
        waiting = [i for i in range(len(self._res.conns)) if i not in failures]
        replies, more = self._gather(waiting, self.timeout, what, errors_restartable)
        failures.update(more)
        if failures:
            replies.update(self._recover(failures, what, message))
        return [replies[i] for i in range(len(self._res.conns))]

    # ------------------------------------------------------------------ supervision
    def _recover(self, failures: dict[int, _Failure], what: str, message: bytes) -> dict[int, bytes]:
        """Replace every failed worker and finish ``what`` with the replacement; returns their replies.

        For ``step`` and ``reset`` the replacement's arenas are reset now (the reply is empty; the
        caller marks the rows). For other commands it gets ``message`` again and resets at the next step.
        """
        replies: dict[int, bytes] = {}
        queue = deque(failures[i] for i in sorted(failures))
        while queue:
            failure = queue.popleft()
            self._check_restart_limit(failure)
            outcome = self._replace(failure) or self._bring_up(failure.index, what, message)
            if isinstance(outcome, _Failure):
                queue.append(outcome)
            else:
                replies[failure.index] = outcome
        return replies

    def _check_restart_limit(self, failure: _Failure) -> None:
        now = time.monotonic()
        while self._restart_times and self._restart_times[0] < now - self.restart_window_seconds:
            self._restart_times.popleft()
        if len(self._restart_times) < self.max_worker_restarts:
            return
        window = self.restart_window_seconds
        self._fail(
            WorkerRestartLimitError(
                f"collector workers failed {len(self._restart_times) + 1} times within {window:g} s, more than "
                f"run.max_worker_restarts = {self.max_worker_restarts} restarts allow "
                f"(run.restart_window_seconds = {window:g}; {self.worker_restarts} restarts in this run). "
                f"Last cause: {failure.reason}. "
                "To fix: check free memory (a worker killed by signal 9 is often the out-of-memory killer: see "
                "`dmesg`; use fewer arenas or workers), run `speedflip doctor`, raise run.max_worker_restarts "
                "if the failures are rare, or collect without worker processes: run.collector=inprocess"
            )
        )

    def _stop_worker(self, index: int) -> None:
        """Stop a failed worker for good: SIGTERM, SIGKILL after a short grace; close its pipe."""
        proc = self._res.procs[index]
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=KILL_GRACE_SECONDS)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=2.0)
        if proc.is_alive():
            # stuck in the kernel; SIGKILL is pending, so it never runs its own code (nor writes to
            # the shared block) again: reap it at shutdown
            self._res.orphans.append(proc)
        self._res.conns[index].close()

    def _replace(self, failure: _Failure) -> _Failure | None:
        """Stop the failed worker and start its replacement (same slice, seed from the restart count).

        Returns a failure if the replacement could not even be started (e.g. out of memory).
        """
        index = failure.index
        self._stop_worker(index)
        self._restart_times.append(time.monotonic())
        self.worker_restarts += 1
        self.last_restart_reason = failure.reason
        buf = self._buf
        assert buf is not None
        # the replacement counts from zero: keep the old worker's totals so the sums never go back
        self._counter_base[index] += buf.counters[index]
        buf.counters[index] = 0.0
        try:
            self._spawn(index, restart_seed(self.seed, self.worker_restarts))
        except OSError as exc:
            reason = f"could not start a replacement for {self._describe_worker(index)}: {exc}"
            return _Failure(index, WorkerFailedError(reason), reason)
        return None

    def _bring_up(self, index: int, what: str, message: bytes) -> bytes | _Failure:
        """Attach a just-started replacement, give it the collector's settings and finish ``what``."""
        hello = self._ask(index, None, self.start_timeout, "restart", errors_restartable=True)
        if isinstance(hello, _Failure):
            return hello
        self._check_hello(index, json.loads(hello.decode()))
        setup = [(self._attach_message(), "attach")]
        if self._reward_weights is not None:
            setup.append((CMD_SET_REWARDS + json.dumps(self._reward_weights).encode(), "set_reward_weights"))
        if self._mechanics_active is not None:
            setup.append((CMD_SET_MECHANICS + (b"1" if self._mechanics_active else b"0"), "set_mechanics_active"))
        if what in ("step", "reset"):
            setup.append((CMD_RESET, "reset"))
        for setup_message, setup_what in setup:
            outcome = self._ask(index, setup_message, self.timeout, setup_what, errors_restartable=True)
            if isinstance(outcome, _Failure):
                return outcome
        if what in ("step", "reset"):
            self._needs_reset.discard(index)
            return b""
        self._needs_reset.add(index)
        return self._ask(index, message, self.timeout, what, errors_restartable=False)

    def _mark_restarted(self, index: int) -> None:
        """The rows of a worker reset in place of a step: truncated at their new reset observations."""
        buf = self._buf
        assert buf is not None
        k0, k1 = self.arena_slices[index]
        a0, a1 = k0 * self.num_cars, k1 * self.num_cars
        buf.final_obs[a0:a1] = buf.obs[a0:a1]
        buf.rewards[a0:a1] = 0.0
        buf.terminated[a0:a1] = False
        buf.truncated[a0:a1] = True
        buf.goal_team[k0:k1] = -1
        buf.episode_done[k0:k1] = False  # no finished-episode record: the episode was cut, not played out

    # ------------------------------------------------------------------ env interface
    def reset(self) -> Array:
        """Start a new episode in every arena; returns observations ``[N, obs_dim]``."""
        self._command(CMD_RESET, "reset", errors_restartable=True)
        self._needs_reset.clear()
        assert self._buf is not None
        return self._buf.obs.copy()

    def step(self, actions: Array) -> StepResult:
        """One decision for every agent, ``tick_skip`` physics ticks in every arena (all workers)."""
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Array) -> None:
        """Hand the actions to the workers and return at once; :meth:`step_wait` collects the result.

        Between the two calls the parent is free, e.g. to run inference for another collector's
        agents while these workers simulate (pipelined collection); no other command may be sent.
        """
        buf = self._buf
        if buf is None:
            raise CollectorError("the collector is closed")
        if self._stepping:
            raise CollectorError("step_async called twice without step_wait")
        buf.actions[:] = self.actions.check(actions, self.num_agents)
        self._step_resets, self._needs_reset = self._needs_reset, set()
        self._send_failures = {}
        for index in range(len(self._res.conns)):
            failure = self._send(index, CMD_RESET if index in self._step_resets else CMD_STEP, "step")
            if failure is not None:
                self._send_failures[index] = failure
        self._stepping = True

    @property
    def pending(self) -> bool:
        """A :meth:`step_async` awaits its :meth:`step_wait`."""
        return self._stepping

    def step_wait(self) -> StepResult:
        """Wait for the step started by :meth:`step_async`; returns what :meth:`step` returns.

        Rows of workers restarted during the step are truncated at their new reset observations.
        """
        if not self._stepping:
            raise CollectorError("step_wait called without step_async")
        self._stepping = False
        failures, self._send_failures = self._send_failures, {}
        waiting = [i for i in range(len(self._res.conns)) if i not in failures]
        _, more = self._gather(waiting, self.timeout, "step", errors_restartable=True)
        failures.update(more)
        restarted = set(self._step_resets)
        self._step_resets = set()
        if failures:
            self._recover(failures, "step", CMD_STEP)
            restarted.update(failures)
        buf = self._buf
        assert buf is not None
        for index in restarted:
            self._mark_restarted(index)
        episodes: list[dict[str, float]] = []
        if buf.episode_done.any():
            for row in buf.episode_stats[buf.episode_done].tolist():
                episodes.append(dict(zip(EPISODE_FIELDS, row, strict=True)))
        return StepResult(
            obs=buf.obs.copy(),
            rewards=buf.rewards.copy(),
            terminated=buf.terminated.copy(),
            truncated=buf.truncated.copy(),
            final_obs=buf.final_obs.copy(),
            episodes=episodes,
            goal_team=buf.goal_team.copy(),
        )

    def _counter(self, column: int) -> float:
        if self._buf is None:
            return 0.0
        return float(self._buf.counters[:, column].sum() + self._counter_base[:, column].sum())

    @property
    def total_touches(self) -> int:
        """Ball touches by all cars since the start."""
        return round(self._counter(0))

    @property
    def total_agent_seconds(self) -> float:
        """Game seconds played, summed over agents."""
        return self._counter(1)

    @property
    def total_goals(self) -> int:
        """Goals scored in all arenas since the start."""
        return round(self._counter(2))

    @property
    def state(self) -> GameArrays:
        """Every arena's state after the last step or reset, as the workers published it (views onto the shared
        block, as :attr:`RocketLeagueVecEnv.state` is the live state: read it before the next step). The rule
        bot, the kickstart's labels and action masks read it in this process."""
        buf = self._buf
        if buf is None:
            raise CollectorError("the collector is closed")
        return GameArrays(buf.state_ball, buf.state_cars, buf.state_pads, buf.state_scores)

    def reward_means(self) -> dict[str, float]:
        """Mean of every reward component over all agents in the last step."""
        buf = self._buf
        if buf is None or not buf.reward_means_valid.all():
            return {}
        means = self._arena_weights @ buf.reward_means / self._arena_weights.sum()
        return {name: float(means[i]) for i, name in enumerate(self.reward_names) if np.isfinite(means[i])}

    def get_rng_state(self) -> dict[str, Any]:
        """Every arena's reset stream as JSON-able data, in the in-process env's format."""
        arenas: list[Any] = []
        for reply in self._command(CMD_GET_RNG, "get_rng_state"):
            arenas.extend(json.loads(reply.decode())["arenas"])
        return {"format": "per-arena-v1", "arena_offset": self.arena_offset, "arenas": arenas}

    def set_rng_state(self, state: dict[str, Any]) -> None:
        """Restore the streams saved by :meth:`get_rng_state` (either backend's)."""
        self._command(CMD_SET_RNG + json.dumps(state).encode(), "set_rng_state")

    def set_reward_weights(self, weights: dict[str, float]) -> None:
        """Switch every worker's reward weights (a reward phase)."""
        self._reward_weights = dict(weights)
        self._command(CMD_SET_REWARDS + json.dumps(weights).encode(), "set_reward_weights")

    def set_mechanics_active(self, active: bool) -> None:
        """Switch the mechanics lane on or off in every worker (see ``RocketLeagueVecEnv.set_mechanics_active``)."""
        self._mechanics_active = bool(active)
        self._command(CMD_SET_MECHANICS + (b"1" if active else b"0"), "set_mechanics_active")

    def describe(self) -> dict[str, Any]:
        """A summary for the start-of-run table."""
        return {
            "arenas": self.num_arenas,
            "agents": self.num_agents,
            "team_sizes": f"{self.cfg.blue_size}v{self.cfg.orange_size}",
            "obs_dim": self.obs_dim,
            "actions": self.actions.coverage.summary(),
            "tick_skip": self.cfg.tick_skip,
            "action_delay_ticks": self.cfg.action_delay_ticks,
            "collector": f"multiprocess ({self.num_workers} workers x {self.threads_per_worker} "
            f"physics threads, {self.start_method})",
        }
