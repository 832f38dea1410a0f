"""The multi-process collector: worker processes own the arenas, shared memory carries the data.

Each worker runs a :class:`~speedflip.env.vec_env.RocketLeagueVecEnv` over a contiguous slice of the
arena pool (physics, observations, rewards, done flags, resets) and writes its results into one
preallocated shared-memory block; the parent writes the actions there and does one batched policy
forward for every agent. Per step the only messages are one command byte to each worker and one
reply byte back: no arrays are pickled and no sockets carry data.

It has the same interface as ``RocketLeagueVecEnv`` and, given the same seed and actions, returns
exactly the same trajectories (each arena draws its resets from its own seeded stream).

Failures are never a hang: every wait watches the worker processes' sentinels and has a timeout. A
worker that raises sends its traceback before exiting; a worker that dies (killed, segfault) is
reported with its exit code; a worker that does not answer within ``timeout`` seconds is named in
a :class:`CollectorTimeoutError`. After any of these the collector shuts down its workers and frees
the shared memory.
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing import shared_memory
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, NoReturn

import numpy as np

from speedflip._types import Array
from speedflip.collect.shared import EPISODE_FIELDS, SharedArrays, make_layout
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
from speedflip.env.actions import LookupTableAction
from speedflip.env.vec_env import StepResult

# modules the fork server loads once so that each forked worker starts in milliseconds
WORKER_PRELOAD = ("speedflip.collect.worker", "speedflip.env.vec_env")


class CollectorError(RuntimeError):
    """A collector worker failed; the message names the worker and says what happened."""


class WorkerFailedError(CollectorError):
    """A worker raised an exception or died."""


class CollectorTimeoutError(CollectorError):
    """A worker did not answer in time (stuck, or the machine is badly overloaded)."""


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
    for conn in res.conns:
        conn.close()
    res.procs.clear()
    res.conns.clear()
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
        timeout: seconds a step (or any command) may take before the collector gives up.
        start_timeout: seconds the workers may take to start and build their arenas.
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
    ) -> None:
        if num_workers < 1:
            raise ValueError("num_workers must be at least 1")
        if threads_per_worker < 1:
            raise ValueError("threads_per_worker must be at least 1")
        self.cfg = cfg
        self.seed = seed
        self.timeout = timeout
        self.start_method = start_method or default_start_method()
        self.num_arenas = cfg.num_arenas
        self.num_cars = cfg.num_cars
        self.num_agents = self.num_arenas * self.num_cars
        self.num_workers = min(num_workers, self.num_arenas)
        self.threads_per_worker = threads_per_worker
        self.start_timeout = start_timeout
        self.car_teams = np.array([0] * cfg.blue_size + [1] * cfg.orange_size, dtype=np.int64)
        self.actions = LookupTableAction()
        self.num_actions = self.actions.num_actions
        bounds = np.linspace(0, self.num_arenas, self.num_workers + 1).astype(int)
        self.arena_slices = [(int(a), int(b)) for a, b in itertools.pairwise(bounds)]
        self._arena_weights = np.array([b - a for a, b in self.arena_slices], np.float64)
        # filled in by _start from what the workers report
        self.obs_dim = 0
        self.reward_names: list[str] = []
        self.shm_name = ""  # the shared block's name (for diagnostics)
        self._buf: SharedArrays | None = None
        self._closed = False
        self._stepping = False  # a step_async awaits its step_wait
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
        ctx = _context(self.start_method)
        if isinstance(ctx, mp.context.ForkServerContext):
            # The fork server imports only what a worker needs (numpy, RocketSim, the env), not the
            # parent's __main__ (which may pull in torch: ~180 MB per worker); workers fork from it.
            # This has no effect if this process' fork server is already running.
            ctx.set_forkserver_preload(list(WORKER_PRELOAD))
        with _thread_env(1), _bare_main_module():
            for index, (a, b) in enumerate(self.arena_slices):
                spec = WorkerSpec(
                    index=index,
                    env_cfg=self.cfg.model_copy(update={"num_arenas": b - a}),
                    seed=self.seed,
                    arena_start=a,
                    arena_stop=b,
                    agent_start=a * self.num_cars,
                    agent_stop=b * self.num_cars,
                    num_threads=self.threads_per_worker,
                )
                parent_end, child_end = ctx.Pipe(duplex=True)
                proc = ctx.Process(
                    target=worker_main, args=(spec, child_end), name=f"speedflip-collector-{index}", daemon=True
                )
                proc.start()
                child_end.close()
                self._res.procs.append(proc)
                self._res.conns.append(parent_end)
        hellos = [json.loads(reply.decode()) for reply in self._wait_all(self.start_timeout, "start")]
        self.obs_dim = int(hellos[0]["obs_dim"])
        self.reward_names = [str(name) for name in hellos[0]["reward_names"]]
        for index, hello in enumerate(hellos):
            if int(hello["obs_dim"]) != self.obs_dim:
                raise CollectorError(
                    f"{self._describe_worker(index)} builds observations of size {hello['obs_dim']}, "
                    f"worker 0 of size {self.obs_dim}"
                )
        layout, size = make_layout(
            self.num_agents, self.obs_dim, self.num_arenas, self.num_workers, len(self.reward_names)
        )
        shm = shared_memory.SharedMemory(create=True, size=size)
        self._res.shm = shm
        self.shm_name = shm.name
        self._buf = SharedArrays.view(shm, layout)
        self._command(CMD_ATTACH + json.dumps({"name": shm.name, "layout": layout}).encode(), "attach")

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

    def _send_all(self, message: bytes) -> None:
        for index, conn in enumerate(self._res.conns):
            try:
                conn.send_bytes(message)
            except OSError:
                self._fail(WorkerFailedError(self._death_message(index, "send")))

    def _fail(self, error: CollectorError) -> NoReturn:
        self.close()
        raise error

    def _wait_all(self, timeout: float, what: str) -> list[bytes]:
        """Wait for one reply from every worker; a dead or silent worker raises, never hangs."""
        if self._closed:
            raise CollectorError("the collector is closed")
        replies: list[bytes] = [b""] * len(self._res.conns)
        pending = set(range(len(self._res.conns)))
        deadline = time.monotonic() + timeout
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                names = ", ".join(self._describe_worker(i) for i in sorted(pending))
                self._fail(
                    CollectorTimeoutError(
                        f"{names} did not answer '{what}' within {timeout:g} s "
                        "(stuck, or the machine is overloaded); the collector was shut down"
                    )
                )
            conns = {self._res.conns[i]: i for i in pending}
            sentinels = {self._res.procs[i].sentinel: i for i in pending}
            ready = wait([*conns, *sentinels], timeout=remaining)
            for obj in ready:
                if isinstance(obj, Connection):
                    index = conns[obj]
                    replies[index] = self._receive(index, what)
                    pending.discard(index)
            for obj in ready:
                if isinstance(obj, int) and sentinels[obj] in pending:
                    index = sentinels[obj]
                    if self._res.conns[index].poll():
                        replies[index] = self._receive(index, what)  # its last words, or a late reply
                        pending.discard(index)
                        continue
                    self._fail(WorkerFailedError(self._death_message(index, what)))
        return replies

    def _death_message(self, index: int, what: str) -> str:
        proc = self._res.procs[index]
        proc.join(timeout=1.0)
        code = proc.exitcode
        if code is None:
            status = "closed its pipe but is still running"
        elif code < 0:
            status = f"died with exit code {code} (killed by signal {-code})"
        else:
            status = f"died with exit code {code}"
        return f"{self._describe_worker(index)} {status} during '{what}'; the collector was shut down"

    def _receive(self, index: int, what: str) -> bytes:
        try:
            reply = self._res.conns[index].recv_bytes()
        except (EOFError, OSError):
            self._fail(WorkerFailedError(self._death_message(index, what)))
        if reply[:1] == REPLY_ERROR:
            self._fail(WorkerFailedError(reply[1:].decode("utf-8", "replace")))
        return reply[1:]

    def _command(self, message: bytes, what: str) -> list[bytes]:
        if self._stepping:
            raise CollectorError(f"'{what}' while a step_async is pending: call step_wait first")
        self._send_all(message)
        return self._wait_all(self.timeout, what)

    # ------------------------------------------------------------------ env interface
    def reset(self) -> Array:
        """Start a new episode in every arena; returns observations ``[N, obs_dim]``."""
        self._command(CMD_RESET, "reset")
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
        self._send_all(CMD_STEP)
        self._stepping = True

    def step_wait(self) -> StepResult:
        """Wait for the step started by :meth:`step_async`; returns what :meth:`step` returns."""
        if not self._stepping:
            raise CollectorError("step_wait called without step_async")
        self._stepping = False
        self._wait_all(self.timeout, "step")
        buf = self._buf
        assert buf is not None
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
        return float(self._buf.counters[:, column].sum())

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
        return {"format": "per-arena-v1", "arena_offset": 0, "arenas": arenas}

    def set_rng_state(self, state: dict[str, Any]) -> None:
        """Restore the streams saved by :meth:`get_rng_state` (either backend's)."""
        self._command(CMD_SET_RNG + json.dumps(state).encode(), "set_rng_state")

    def set_reward_weights(self, weights: dict[str, float]) -> None:
        """Switch every worker's reward weights (a reward phase)."""
        self._command(CMD_SET_REWARDS + json.dumps(weights).encode(), "set_reward_weights")

    def set_mechanics_active(self, active: bool) -> None:
        """Switch the mechanics lane on or off in every worker (see ``RocketLeagueVecEnv.set_mechanics_active``)."""
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
