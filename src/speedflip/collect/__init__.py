"""Rollout collection backends behind one interface (:class:`~speedflip.collect.base.VecEnv`).

- ``inprocess``: :class:`~speedflip.env.vec_env.RocketLeagueVecEnv`; the physics of the arenas runs
  in a thread pool (``Arena.step`` releases the GIL), observations and rewards in the main thread.
- ``multiprocess``: :class:`~speedflip.collect.multiprocess.MultiProcessVecEnv`; worker processes
  own the arenas and compute observations and rewards too, over shared memory.
- ``pipelined``: :class:`~speedflip.collect.pipelined.PipelinedVecEnv`; worker processes in two groups, the
  parent acts for one group while the other's workers simulate (inference overlapped with physics).
- ``ray``: :class:`~speedflip.collect.ray_collector.RayCollector`; Ray actors on this machine or a
  cluster, each an in-process collector with its own arenas, return whole rollouts (optional extra
  ``speedflip[ray]``; Ray is imported only when a run asks for it).

:func:`make_vec_env` picks one from the config (``run.collector``, ``run.num_workers``,
``run.num_threads``) and the machine's core count; :func:`choose_collector` says which and why.

Each backend declares what it can drive (:data:`CAPABILITIES`), each config what it needs
(:func:`required_capabilities`): ``auto`` picks worker processes only when they can drive everything the
config needs, so a config that runs on 2 cores runs on 64; an explicit ``run.collector: multiprocess``
that cannot is a :class:`~speedflip.config.ConfigError` naming the setting and both fixes, raised by
:func:`check_collector` before a run builds or writes anything.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Literal

from speedflip.config import ConfigError

if TYPE_CHECKING:
    from speedflip.collect.base import VecEnv
    from speedflip.config import Config

Backend = Literal["inprocess", "multiprocess", "pipelined", "ray"]

# From this many cores on, `auto` uses worker processes. On the 2-core development machine in-process
# collection was as fast as two workers or faster in every run; workers gained more per added core
# (+28 % vs +16 % from one to two), so they win from a few cores on (docs/performance.md).
AUTO_MULTIPROCESS_MIN_CORES = 4
PIPELINE_GROUPS = 2  # run.collector=pipelined: groups of worker processes stepped in turn


@dataclass(frozen=True)
class CollectorPlan:
    """The backend and thread/process counts a config resolves to on this machine."""

    backend: Backend
    num_workers: int  # worker processes (0 for inprocess), Ray actors for ray
    physics_threads: int  # per worker for multiprocess and ray, in total for inprocess
    reason: str


@dataclass(frozen=True)
class Capabilities:
    """What a collection backend can drive (one flag per feature a config may need)."""

    continuous_actions: bool  # env.action_form=continuous: controls computed from the policy's output
    multi_discrete_actions: bool  # env.action_form=multi_discrete
    action_masks: bool  # env.action_masking: masks computed from the arena state before every step
    rule_bot: bool  # the rule bot in the opponent pool: it reads the arena state
    recurrent: bool  # algo=ppo_recurrent: one state row per agent, kept by the acting network
    render: bool  # --render: the arena state streamed to RLViser
    rlgym: bool  # env.rlgym: the RLGym v2 adapter (its envs step in this process)

    def supports(self, capability: str) -> bool:
        return bool(getattr(self, capability))

    def names(self) -> list[str]:
        return [f.name for f in fields(self) if getattr(self, f.name)]


# Read off the code: the in-process env exposes the arenas' state (``RocketLeagueVecEnv.state``) and
# steps controls as well as table indices; worker processes step lookup-table indices only (``worker.py``:
# ``env.step(buf.actions[...])``) and publish the arenas' state to shared memory after every step
# (``MultiProcessVecEnv.state``), so the rule bot, the kickstart's labels and action masks run in the parent.
# The recurrent state lives in the acting network in this process, so both backends carry it.
CAPABILITIES: dict[Backend, Capabilities] = {
    "inprocess": Capabilities(
        continuous_actions=True, multi_discrete_actions=True, action_masks=True, rule_bot=True, recurrent=True,
        render=True, rlgym=True,
    ),
    "multiprocess": Capabilities(
        continuous_actions=False, multi_discrete_actions=False, action_masks=True, rule_bot=True, recurrent=True,
        render=False, rlgym=False,
    ),
    # worker processes in two groups: what one pool of workers drives, but the acting network's recurrent state
    # rows are kept for the whole pool at once (not split by group)
    "pipelined": Capabilities(
        continuous_actions=False, multi_discrete_actions=False, action_masks=True, rule_bot=True, recurrent=False,
        render=False, rlgym=False,
    ),
    # every actor is an in-process collector; only what must reach this process stays out of reach
    "ray": Capabilities(
        continuous_actions=True, multi_discrete_actions=True, action_masks=True, rule_bot=True, recurrent=True,
        render=False, rlgym=False,
    ),
}  # fmt: skip

# why worker processes cannot drive a capability (for the messages)
_WHY_NOT_MULTIPROCESS = {
    "continuous_actions": "worker processes step lookup-table indices only",
    "multi_discrete_actions": "worker processes step lookup-table indices only",
    "action_masks": "",
    "rule_bot": "",
    "render": "RLViser is sent the arena state every tick, which stays in the worker processes",
    "rlgym": "the RLGym adapter runs its envs in this process",
    "recurrent": "",
}
_WHY_NOT_PIPELINED = {
    **_WHY_NOT_MULTIPROCESS,
    "recurrent": "the recurrent state rows are stepped for all arenas at once, not group by group",
}
_WHY_NOT_RAY = {
    "render": "RLViser is sent the arena state, which stays in the Ray actors",
    "rlgym": "the actors build speedflip's own env from the config; an RLGym factory would have to be on every node",
}
RAY_INSTALL_MESSAGE = (
    "run.collector=ray needs Ray, an optional extra: pip install 'speedflip[ray]' (the same on every node of "
    "the cluster), or set run.collector=inprocess"
)


@dataclass(frozen=True)
class Requirement:
    """A capability a config needs, the setting that needs it and the setting that would not."""

    capability: str  # a field of :class:`Capabilities`
    setting: str  # e.g. "env.action_form=continuous"
    turn_off: str  # e.g. "env.action_form=table"
    overrides: tuple[str, ...] = ()  # the --set values that do it, when it is a setting ("--render" is not)


def _rule_bot_setting(cfg: Config) -> str | None:
    """The setting that puts the rule bot into pool arenas, or None when it never plays in training.

    Pool arenas are ``round(share * env.num_arenas)`` of the arenas (the matchmaker's rule), with the
    share of every curriculum stage when the curriculum is on, else ``selfplay.opponent_share``.
    """
    if not cfg.selfplay.include_rule:
        return None
    arenas = cfg.env.num_arenas
    if cfg.curriculum.enabled:
        for i, stage in enumerate(cfg.curriculum.stages):
            if round(stage.opponent_share * arenas) > 0:
                return f"selfplay.include_rule=true with curriculum.stages[{i}].opponent_share={stage.opponent_share:g}"
        return None
    share = cfg.selfplay.opponent_share
    if round(share * arenas) > 0:
        return f"selfplay.include_rule=true with selfplay.opponent_share={share:g}"
    return None


def _setting(capability: str, setting: str, *overrides: str) -> Requirement:
    """A requirement these ``--set KEY=VALUE`` overrides turn off (named together in the message)."""
    return Requirement(capability, setting, " with ".join(overrides), overrides)


def required_capabilities(cfg: Config, render: bool = False) -> list[Requirement]:
    """What collecting for ``cfg`` needs beyond stepping lookup-table indices (``render``: ``--render``)."""
    env = cfg.env
    needed: list[Requirement] = []
    if env.action_form == "continuous":
        needed.append(_setting("continuous_actions", "env.action_form=continuous", "env.action_form=table"))
    elif env.action_form == "multi_discrete":
        needed.append(_setting("multi_discrete_actions", "env.action_form=multi_discrete", "env.action_form=table"))
    if env.action_masking:
        needed.append(_setting("action_masks", "env.action_masking=true", "env.action_masking=false"))
    rule = _rule_bot_setting(cfg)
    if rule is not None:
        # a fixed rule-bot share without the rule bot is refused too (SelfPlayConfig): the fix unsets it
        unset_share = () if cfg.selfplay.rule_share is None else ("selfplay.rule_share=null",)
        needed.append(_setting("rule_bot", rule, "selfplay.include_rule=false", *unset_share))
    if cfg.ppo.kickstart_coef > 0:
        setting = f"ppo.kickstart_coef={cfg.ppo.kickstart_coef:g}"
        needed.append(_setting("rule_bot", setting, "ppo.kickstart_coef=0"))
    if cfg.algo == "ppo_recurrent":
        needed.append(_setting("recurrent", "algo=ppo_recurrent", "algo=ppo"))
    if render:
        needed.append(Requirement("render", "--render", "leave out --render"))
    if env.rlgym is not None:
        needed.append(Requirement("rlgym", f"env.rlgym={env.rlgym}", "leave env.rlgym unset"))
    return needed


def missing_capabilities(backend: Backend, needed: list[Requirement]) -> list[Requirement]:
    """The requirements ``backend`` cannot meet."""
    return [r for r in needed if not CAPABILITIES[backend].supports(r.capability)]


def unsupported_reason(backend: Backend, capability: str) -> str:
    """Why ``backend`` cannot drive ``capability`` (empty when it can, or no reason is recorded)."""
    reasons = {"multiprocess": _WHY_NOT_MULTIPROCESS, "pipelined": _WHY_NOT_PIPELINED, "ray": _WHY_NOT_RAY}
    return reasons.get(backend, {}).get(capability, "")


def unsupported_message(backend: Backend, missing: list[Requirement]) -> str:
    """``run.collector=multiprocess cannot drive env.action_form=continuous (why): set run.collector=inprocess
    or env.action_form=table``, one sentence per missing capability."""
    parts = []
    for r in missing:
        why = unsupported_reason(backend, r.capability)
        because = f" ({why})" if why else ""
        parts.append(
            f"run.collector={backend} cannot drive {r.setting}{because}: set run.collector=inprocess or {r.turn_off}"
        )
    return "; ".join(parts)


def available_cores() -> int:
    """CPU cores this process may run on (the affinity mask where the OS has one)."""
    if sys.platform.startswith("linux"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def choose_collector(cfg: Config, cores: int | None = None, render: bool = False) -> CollectorPlan:
    """Resolve ``run.collector`` / ``run.num_workers`` / ``run.num_threads`` for ``cores`` cores.

    ``auto`` picks worker processes from :data:`AUTO_MULTIPROCESS_MIN_CORES` cores on, and only when they
    can drive everything the config needs (:func:`required_capabilities`); an explicit ``multiprocess``
    that cannot raises :class:`~speedflip.config.ConfigError` naming the setting and both fixes.
    """
    cores = cores or available_cores()
    run = cfg.run
    if run.collector == "ray":
        return _ray_plan(cfg, render)
    if run.collector == "pipelined":
        return _pipelined_plan(cfg, cores, render)
    missing = missing_capabilities("multiprocess", required_capabilities(cfg, render))
    if run.collector == "auto":
        if cores < AUTO_MULTIPROCESS_MIN_CORES:
            backend: Backend = "inprocess"
            reason = (
                f"auto: {cores} cores < {AUTO_MULTIPROCESS_MIN_CORES}: in-process threads collect as fast as "
                "worker processes or faster on few cores (docs/performance.md)"
            )
        elif missing:
            backend = "inprocess"
            needs = "; ".join(f"{r.setting} ({_WHY_NOT_MULTIPROCESS[r.capability]})" for r in missing)
            reason = f"auto: {cores} cores, but worker processes cannot drive {needs}: in-process threads"
        else:
            backend = "multiprocess"
            reason = f"auto: {cores} cores >= {AUTO_MULTIPROCESS_MIN_CORES}: worker processes scale with cores"
    else:
        backend = run.collector
        if missing and backend == "multiprocess":
            raise ConfigError(unsupported_message("multiprocess", missing))
        reason = "set by run.collector"
    if backend == "inprocess":
        return CollectorPlan("inprocess", 0, run.num_threads or cores, reason)
    workers = min(run.num_workers or cores, cfg.env.num_arenas)
    threads = max(1, run.num_threads // workers) if run.num_threads else 1
    return CollectorPlan("multiprocess", workers, threads, reason)


def _pipelined_plan(cfg: Config, cores: int, render: bool) -> CollectorPlan:
    """``run.collector: pipelined``: two groups of worker processes; ``run.num_workers`` (0 = ``cores - 1`` per
    group: the workers of the group that simulates plus the parent, which acts for the other, fill the cores)."""
    missing = missing_capabilities("pipelined", required_capabilities(cfg, render))
    if missing:
        raise ConfigError(unsupported_message("pipelined", missing))
    if cfg.env.num_arenas < PIPELINE_GROUPS:
        raise ConfigError(
            f"run.collector=pipelined splits the arenas into {PIPELINE_GROUPS} groups, but env.num_arenas is "
            f"{cfg.env.num_arenas}: set env.num_arenas >= {PIPELINE_GROUPS} or run.collector=inprocess"
        )
    run = cfg.run
    per_group = max(1, run.num_workers // PIPELINE_GROUPS) if run.num_workers else max(1, cores - 1)
    per_group = min(per_group, cfg.env.num_arenas // PIPELINE_GROUPS)
    threads = max(1, run.num_threads // (per_group * PIPELINE_GROUPS)) if run.num_threads else 1
    reason = f"set by run.collector: {PIPELINE_GROUPS} groups of {per_group} worker processes, stepped in turn"
    return CollectorPlan("pipelined", per_group * PIPELINE_GROUPS, threads, reason)


def _ray_plan(cfg: Config, render: bool) -> CollectorPlan:
    """``run.collector: ray``: refused when the actors cannot drive the config or Ray is not installed
    (looked up without importing it)."""
    missing = missing_capabilities("ray", required_capabilities(cfg, render))
    if missing:
        raise ConfigError(unsupported_message("ray", missing))
    if importlib.util.find_spec("ray") is None:
        raise ConfigError(RAY_INSTALL_MESSAGE)
    run = cfg.run
    where = run.ray_address or "a local cluster"
    reason = f"set by run.collector: {run.ray_actors} Ray actors x {cfg.env.num_arenas} arenas on {where}"
    return CollectorPlan("ray", run.ray_actors, max(1, int(run.ray_cpus_per_actor)), reason)


def check_collector(cfg: Config, render: bool = False, cores: int | None = None) -> CollectorPlan:
    """Refuse a config its collector cannot drive (:class:`~speedflip.config.ConfigError`), before a run
    builds or writes anything; returns the plan :func:`make_vec_env` will follow on this machine."""
    return choose_collector(cfg, cores, render)


def make_vec_env(cfg: Config, seed: int | None = None) -> VecEnv:
    """Build the collection backend chosen by :func:`choose_collector` (seed: ``run.seed`` by default).

    With ``env.rlgym`` set, the RLGym v2 adapter (in-process, per-env Python loop) is used instead.
    """
    seed = cfg.run.seed if seed is None else seed
    if cfg.env.rlgym is not None:
        from speedflip.env.rlgym_adapter import make_rlgym_vec_env

        return make_rlgym_vec_env(cfg, seed)
    plan = choose_collector(cfg)
    if plan.backend == "pipelined":
        from speedflip.collect.pipelined import PipelinedVecEnv

        return PipelinedVecEnv(
            cfg.env,
            seed=seed,
            workers_per_group=plan.num_workers // PIPELINE_GROUPS,
            num_groups=PIPELINE_GROUPS,
            threads_per_worker=plan.physics_threads,
            timeout=cfg.run.worker_timeout_seconds,
            max_worker_restarts=cfg.run.max_worker_restarts,
            restart_window_seconds=cfg.run.restart_window_seconds,
        )
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


__all__ = [
    "CAPABILITIES",
    "PIPELINE_GROUPS",
    "RAY_INSTALL_MESSAGE",
    "Capabilities",
    "CollectorPlan",
    "Requirement",
    "available_cores",
    "check_collector",
    "choose_collector",
    "make_vec_env",
    "missing_capabilities",
    "required_capabilities",
    "unsupported_message",
]
