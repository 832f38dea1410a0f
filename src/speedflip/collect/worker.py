"""The worker process of the multi-process collector.

A worker owns arenas ``[arena_start, arena_stop)`` of the pool: it runs a
:class:`~speedflip.env.vec_env.RocketLeagueVecEnv` over them (physics, observations, rewards, done
flags and resets all happen here) and exchanges data with the parent only through shared memory.
The pipe carries one command byte per step and one reply byte back; rare commands (RNG state)
carry a small JSON payload.

A worker whose code raises (the environment rejects an action, a bad setting, a bug) replies
:data:`REPLY_ERROR` with a JSON report of the exception (:func:`error_report`: its type, message,
where it was raised and the traceback) and exits; the parent raises it as the worker's own error
instead of treating it like a crash.

Thread settings are applied before numpy or RocketSim are imported in this process, so each
worker uses exactly ``num_threads`` physics threads and single-threaded BLAS/OpenMP.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from speedflip.collect.shared import EPISODE_FIELDS

if TYPE_CHECKING:
    from speedflip.collect.shared import SharedArrays
    from speedflip.config import EnvConfig
    from speedflip.env.vec_env import RocketLeagueVecEnv

# commands (parent -> worker), first byte of a message
CMD_ATTACH = b"a"  # + JSON {"name": shared block, "layout": ...}; sent once after start
CMD_STEP = b"s"
CMD_RESET = b"r"
CMD_GET_RNG = b"g"
CMD_SET_RNG = b"G"
CMD_SET_REWARDS = b"w"  # + JSON {component: weight}
CMD_SET_MECHANICS = b"m"  # + b"1" (mechanics lane on) or b"0" (off)
CMD_CLOSE = b"c"
# replies (worker -> parent), first byte of a message
REPLY_OK = b"\x00"
REPLY_ERROR = b"\x01"

# The thread counts every worker pins (numpy's BLAS, OpenMP, MKL, numexpr): a worker's numpy work is
# small elementwise math, and extra BLAS threads would only fight the physics for cores.
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs, sent once at start (pickled by ``multiprocessing``)."""

    index: int
    env_cfg: EnvConfig  # num_arenas = this worker's share
    seed: int
    arena_start: int
    arena_stop: int
    agent_start: int
    agent_stop: int
    num_threads: int
    arena_offset: int = 0  # the global index of the collector's first arena (a group of a pipelined pool)
    blas_threads: int = 1


def error_report(spec: WorkerSpec, exc: BaseException) -> bytes:
    """The :data:`REPLY_ERROR` payload for an exception raised in a worker: JSON with ``type`` (the
    exception's class name), ``message`` (``str(exc)``), ``where`` (the innermost frame as
    ``file:line in function``), ``traceback`` and the worker's ``index`` and ``arenas``."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
    report = {
        "index": spec.index,
        "arenas": [spec.arena_start, spec.arena_stop - 1],
        "type": type(exc).__name__,
        "message": str(exc),
        "where": where,
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    }
    return json.dumps(report).encode("utf-8", "replace")


def worker_main(spec: WorkerSpec, conn: Connection) -> None:
    """Entry point of a worker process: build the arenas, then serve commands until told to close."""
    for var in THREAD_ENV_VARS:
        os.environ[var] = str(spec.blas_threads)
    # Ctrl-C goes to the whole process group; the parent decides when workers stop (it may want to
    # finish an iteration and save a checkpoint first), so workers ignore SIGINT.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        _Worker(spec, conn).serve()
    except (BrokenPipeError, EOFError):
        return  # the parent is gone; nobody to report to
    except Exception as exc:
        with contextlib.suppress(OSError):
            conn.send_bytes(REPLY_ERROR + error_report(spec, exc))
        raise SystemExit(1) from None


class _Worker:
    def __init__(self, spec: WorkerSpec, conn: Connection) -> None:
        self.spec = spec
        self.conn = conn

    def serve(self) -> None:
        from multiprocessing import shared_memory

        from speedflip.collect.shared import SharedArrays
        from speedflip.env.actions import table_digest
        from speedflip.env.vec_env import RocketLeagueVecEnv

        spec = self.spec
        offset = spec.arena_offset + spec.arena_start  # the global index of the worker's first arena
        env = RocketLeagueVecEnv(spec.env_cfg, seed=spec.seed, num_threads=spec.num_threads, arena_offset=offset)
        shm: shared_memory.SharedMemory | None = None
        try:
            from speedflip.env.rewards import REWARD_COMPONENTS

            hello = {
                "obs_dim": env.obs_dim,
                "reward_names": list(REWARD_COMPONENTS),
                "num_actions": env.num_actions,
                "table_sha256": table_digest(env.actions.table),
            }
            self.conn.send_bytes(REPLY_OK + json.dumps(hello).encode())
            message = self.conn.recv_bytes()
            if message[:1] == CMD_CLOSE:
                return
            if message[:1] != CMD_ATTACH:
                raise RuntimeError(f"expected the attach command first, got {message[:1]!r}")
            where = json.loads(message[1:].decode())
            shm = shared_memory.SharedMemory(name=where["name"])
            layout = [(name, dtype, tuple(shape), offset) for name, dtype, shape, offset in where["layout"]]
            self.buf: SharedArrays | None = SharedArrays.view(shm, layout)
            self.conn.send_bytes(REPLY_OK)
            self._loop(env, self.buf)
        finally:
            env.close()
            self.buf = None  # drop the views before closing the block
            if shm is not None:
                shm.close()

    def _loop(self, env: RocketLeagueVecEnv, buf: SharedArrays) -> None:
        import numpy as np

        from speedflip.env.rewards import REWARD_COMPONENTS

        spec, conn = self.spec, self.conn
        a0, a1, k0, k1, w = spec.agent_start, spec.agent_stop, spec.arena_start, spec.arena_stop, spec.index
        reward_names = list(REWARD_COMPONENTS)  # every component has a slot; inactive ones are NaN

        def publish_state() -> None:
            state = env.state
            buf.state_ball[k0:k1] = state.ball
            buf.state_cars[k0:k1] = state.cars
            buf.state_pads[k0:k1] = state.pads
            buf.state_scores[k0:k1] = state.scores

        def publish_counters() -> None:
            buf.counters[w] = (env.total_touches, env.total_agent_seconds, env.total_goals)
            means = env.reward_fn.last_means
            if means:
                buf.reward_means[w, : len(reward_names)] = [means.get(n, np.nan) for n in reward_names]
                buf.reward_means_valid[w] = True

        while True:
            message = conn.recv_bytes()
            command, payload = message[:1], message[1:]
            if command == CMD_STEP:
                # a copy: the env keeps a reference to its actions, and views must not outlive the block
                result = env.step(buf.actions[a0:a1].copy())
                buf.obs[a0:a1] = result.obs
                buf.final_obs[a0:a1] = result.final_obs
                buf.rewards[a0:a1] = result.rewards
                buf.terminated[a0:a1] = result.terminated
                buf.truncated[a0:a1] = result.truncated
                buf.goal_team[k0:k1] = -1 if result.goal_team is None else result.goal_team
                ended = (result.terminated | result.truncated).reshape(k1 - k0, -1)[:, 0]
                buf.episode_done[k0:k1] = ended
                if result.episodes:
                    stats = [[ep[f] for f in EPISODE_FIELDS] for ep in result.episodes]
                    buf.episode_stats[k0:k1][ended] = np.asarray(stats, np.float64)
                publish_state()
                publish_counters()
                conn.send_bytes(REPLY_OK)
            elif command == CMD_RESET:
                buf.obs[a0:a1] = env.reset()
                buf.goal_team[k0:k1] = -1
                buf.episode_done[k0:k1] = False
                publish_state()
                publish_counters()
                conn.send_bytes(REPLY_OK)
            elif command == CMD_GET_RNG:
                conn.send_bytes(REPLY_OK + json.dumps(env.get_rng_state()).encode())
            elif command == CMD_SET_RNG:
                state: dict[str, Any] = json.loads(payload.decode())
                env.set_rng_state(state)
                conn.send_bytes(REPLY_OK)
            elif command == CMD_SET_REWARDS:
                env.set_reward_weights({str(k): float(v) for k, v in json.loads(payload.decode()).items()})
                conn.send_bytes(REPLY_OK)
            elif command == CMD_SET_MECHANICS:
                env.set_mechanics_active(payload == b"1")
                conn.send_bytes(REPLY_OK)
            elif command == CMD_CLOSE:
                conn.send_bytes(REPLY_OK)
                return
            else:
                raise RuntimeError(f"unknown collector command {command!r}")
