"""Rollout collection backends behind one interface (:class:`~speedflip.collect.base.VecEnv`).

- ``inprocess``: :class:`~speedflip.env.vec_env.RocketLeagueVecEnv`; the physics of the arenas runs
  in a thread pool (``Arena.step`` releases the GIL), observations and rewards in the main thread.
- ``multiprocess``: :class:`~speedflip.collect.multiprocess.MultiProcessVecEnv`; worker processes
  own the arenas and compute observations and rewards too, over shared memory.

:func:`make_vec_env` picks one from the config (``run.collector``, ``run.num_workers``,
``run.num_threads``) and the machine's core count; :func:`choose_collector` says which and why.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from speedflip.collect.base import VecEnv
    from speedflip.config import Config

Backend = Literal["inprocess", "multiprocess"]

# From this many cores on, `auto` uses worker processes. On the 2-core development machine in-process
# collection was as fast as two workers or faster in every run; workers gained more per added core
# (+28 % vs +16 % from one to two), so they win from a few cores on (docs/performance.md).
AUTO_MULTIPROCESS_MIN_CORES = 4


@dataclass(frozen=True)
class CollectorPlan:
    """The backend and thread/process counts a config resolves to on this machine."""

    backend: Backend
    num_workers: int  # worker processes (0 for inprocess)
    physics_threads: int  # per worker for multiprocess, in total for inprocess
    reason: str


def available_cores() -> int:
    """CPU cores this process may run on (the affinity mask where the OS has one)."""
    if sys.platform.startswith("linux"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def choose_collector(cfg: Config, cores: int | None = None) -> CollectorPlan:
    """Resolve ``run.collector`` / ``run.num_workers`` / ``run.num_threads`` for ``cores`` cores."""
    cores = cores or available_cores()
    run = cfg.run
    if run.collector == "auto":
        if cores >= AUTO_MULTIPROCESS_MIN_CORES:
            backend: Backend = "multiprocess"
            reason = f"auto: {cores} cores >= {AUTO_MULTIPROCESS_MIN_CORES}: worker processes scale with cores"
        else:
            backend = "inprocess"
            reason = (
                f"auto: {cores} cores < {AUTO_MULTIPROCESS_MIN_CORES}: in-process threads collect as fast as "
                "worker processes or faster on few cores (docs/performance.md)"
            )
    else:
        backend = run.collector
        reason = "set by run.collector"
    if backend == "inprocess":
        return CollectorPlan("inprocess", 0, run.num_threads or cores, reason)
    workers = min(run.num_workers or cores, cfg.env.num_arenas)
    threads = max(1, run.num_threads // workers) if run.num_threads else 1
    return CollectorPlan("multiprocess", workers, threads, reason)


def make_vec_env(cfg: Config, seed: int | None = None) -> VecEnv:
    """Build the collection backend chosen by :func:`choose_collector` (seed: ``run.seed`` by default).

    With ``env.rlgym`` set, the RLGym v2 adapter (in-process, per-env Python loop) is used instead.
    """
    seed = cfg.run.seed if seed is None else seed
    if cfg.env.rlgym is not None:
        from speedflip.env.rlgym_adapter import make_rlgym_vec_env

        return make_rlgym_vec_env(cfg, seed)
    plan = choose_collector(cfg)
    if plan.backend == "multiprocess":
        from speedflip.collect.multiprocess import MultiProcessVecEnv

        return MultiProcessVecEnv(
            cfg.env,
            seed=seed,
            num_workers=plan.num_workers,
            threads_per_worker=plan.physics_threads,
            timeout=cfg.run.worker_timeout_seconds,
            max_worker_restarts=cfg.run.max_worker_restarts,
            restart_window_seconds=cfg.run.restart_window_seconds,
        )
    from speedflip.env.vec_env import RocketLeagueVecEnv

    return RocketLeagueVecEnv(cfg.env, seed=seed, num_threads=plan.physics_threads)


__all__ = ["CollectorPlan", "available_cores", "choose_collector", "make_vec_env"]
