"""``speedflip bench``: collection and training throughput against the physics limit, in one process.

Everything is measured in this run, on this machine, for one config (the ``1v1`` preset unless
told otherwise), and reported in *agent steps per second* (one decision of one car):

- **physics limit**: raw ``Arena.step`` ticks per second for the same arenas on every core, with
  nothing else (no controls, no state export, no Python work per step);
  ``agent_sps = ticks/s / tick_skip * cars per arena``.
- **collect**: the trainer's own rollout (``Trainer.collect``: observations, rewards, done flags,
  resets, obs normalisation and the policy + value forward passes of the configured network) per
  backend: in-process physics threads and worker processes.
- **train**: collection + PPO update, end to end, with the backend ``run.collector`` resolves to.
- **RLGym**: the same match (1v1, tick skip 8, kickoffs, goal + touch rewards, goal/no-touch/timeout
  conditions) composed from RLGym v2 components and run through RLGym's own per-env loop, one
  batched forward of the same network for all agents per step (and once without any inference).
- optionally (``--peer rlgym-learn``) a **peer trainer**: rlgym-learn + rlgym-learn-algos PPO on the
  same match (RLGym ``DefaultObs``, ``LookupTableAction``, goal + touch rewards) with the same network
  and batch, run from its own virtualenv by ``benchmarks/peer_rlgym_learn.py`` for a fixed wall time;
  its overall agent steps/s (collection + update) against ``train``'s.
- a **time breakdown** (physics, observations, rewards, the rest of the env step, inference, the
  trainer's bookkeeping, learning), **memory** per arena, and collection at twice the arenas.

Measurements are interleaved in rounds so that other load on the machine hits them alike; the CPU
time other processes used during each measurement is reported next to it (Linux).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from speedflip import __version__
from speedflip.collect import (
    Requirement,
    choose_collector,
    missing_capabilities,
    required_capabilities,
    unsupported_message,
    unsupported_reason,
)
from speedflip.collect.arena_collector import ArenaCollector
from speedflip.collect.multiprocess import MultiProcessVecEnv
from speedflip.collect.pipelined import PipelinedVecEnv
from speedflip.config import Config, ConfigError, apply_overrides, build_config, config_to_dict, resolve_config
from speedflip.device import torch_threads
from speedflip.env.arenas import Arenas
from speedflip.env.sim import init_rocketsim
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.models.mlp import ActorCritic

# ---------------------------------------------------------------------- probes


class Stopwatch:
    """Accumulated wall time per key; nested calls under the same key count once (the outermost)."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self.enabled = True  # when False, calls are not counted
        self._depth: dict[str, int] = {}

    @contextlib.contextmanager
    def measure(self, key: str) -> Iterator[None]:
        depth = self._depth.get(key, 0)
        self._depth[key] = depth + 1
        start = time.perf_counter()
        try:
            yield
        finally:
            self._depth[key] = depth
            if depth == 0 and self.enabled:
                self.totals[key] = self.totals.get(key, 0.0) + time.perf_counter() - start

    def reset(self) -> None:
        self.totals.clear()


def instrument(obj: object, method: str, key: str, watch: Stopwatch) -> None:
    """Time every call of ``obj.<method>`` under ``key``, for this one object only.

    The object's class is swapped for a subclass whose method wraps the original, so the exact
    production code runs, with two clock reads around it.
    """
    cls = type(obj)
    original: Callable[..., Any] = getattr(cls, method)

    def timed(self: object, *args: Any, **kwargs: Any) -> Any:
        with watch.measure(key):
            return original(self, *args, **kwargs)

    obj.__class__ = type(f"Timed{cls.__name__}", (cls,), {method: timed})


_CLOCK_TICKS = 100 if sys.platform == "win32" else os.sysconf("SC_CLK_TCK")


def _proc_cpu_ticks(pid: int) -> int:
    """utime + stime of a process (all its threads), in clock ticks; 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def _busy_ticks() -> int | None:
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    return user + nice + system + irq + softirq + steal


class CpuMeter:
    """CPU used during a block by this process (and ``extra_pids``) and by everything else (Linux)."""

    def __init__(self, extra_pids: Callable[[], list[int]] | None = None) -> None:
        self.extra_pids = extra_pids or (lambda: [])
        self.own_cores: float | None = None
        self.other_cores: float | None = None

    def _own(self) -> int:
        return sum(_proc_cpu_ticks(pid) for pid in [os.getpid(), *self.extra_pids()])

    def __enter__(self) -> CpuMeter:
        self._busy0, self._own0, self._t0 = _busy_ticks(), self._own(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        busy, own, wall = _busy_ticks(), self._own(), time.perf_counter() - self._t0
        if busy is None or self._busy0 is None or wall <= 0:
            return
        self.own_cores = (own - self._own0) / _CLOCK_TICKS / wall
        self.other_cores = max(0.0, (busy - self._busy0) - (own - self._own0)) / _CLOCK_TICKS / wall


def rss_bytes(pid: int | None = None) -> int | None:
    """Resident memory of a process (Linux ``/proc``), else None."""
    return _proc_status_kb(pid or os.getpid(), "VmRSS:")


def pss_bytes(pid: int) -> int | None:
    """Proportional set size (shared pages split between the processes sharing them), Linux only."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _proc_status_kb(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


# ---------------------------------------------------------------------- measurements


@dataclass
class Measure:
    """Agent steps and seconds accumulated over rounds, plus the machine's other load meanwhile."""

    name: str
    steps: int = 0
    seconds: float = 0.0
    other_cores: list[float] = field(default_factory=list)
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def sps(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    def add(self, steps: int, seconds: float, meter: CpuMeter) -> None:
        self.steps += steps
        self.seconds += seconds
        if meter.other_cores is not None:
            self.other_cores.append(meter.other_cores)

    @property
    def other_load(self) -> float | None:
        return float(np.mean(self.other_cores)) if self.other_cores else None


def _run_for(
    seconds: float, step: Callable[[], int], measure: Measure, pids: Callable[[], list[int]] | None = None
) -> None:
    """Call ``step`` (returns agent steps done) until ``seconds`` have passed (at least once)."""
    with CpuMeter(pids) as meter:
        start = time.perf_counter()
        steps = 0
        while True:
            steps += step()
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                break
    measure.add(steps, elapsed, meter)


def _worker_pids(env: object) -> Callable[[], list[int]] | None:
    """For the CPU meter: the worker processes of a multi-process or pipelined collector (None in process)."""
    if not isinstance(env, (MultiProcessVecEnv, PipelinedVecEnv)):
        return None

    def pids() -> list[int]:
        return [p for p in env.pids if p is not None]

    return pids


class EnvOnly:
    """Steps a trainer's env with random actions (no inference, no trainer work): the env's own cost."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.rng = np.random.default_rng(0)

    def step(self) -> int:
        env = self.trainer.env
        result = env.step(self.rng.integers(0, env.num_actions, env.num_agents))
        self.trainer.collector.obs = result.obs  # keep the trainer's rollout consistent
        return int(env.num_agents)


def _collect_once(trainer: Any) -> int:
    _, _, stats = trainer.collect()
    return int(stats.steps)


def _make_rlgym_envs(cfg: Config, count: int) -> list[Any]:
    """``count`` RLGym v2 envs matching ``cfg.env`` as closely as RLGym's stock components allow."""
    from rlgym.api import RLGym
    from rlgym.rocket_league.action_parsers import LookupTableAction, RepeatAction
    from rlgym.rocket_league.done_conditions import (
        AnyCondition,
        GoalCondition,
        NoTouchTimeoutCondition,
        TimeoutCondition,
    )
    from rlgym.rocket_league.obs_builders import DefaultObs
    from rlgym.rocket_league.reward_functions import CombinedReward, GoalReward, TouchReward
    from rlgym.rocket_league.sim import RocketSimEngine
    from rlgym.rocket_league.state_mutators import FixedTeamSizeMutator, KickoffMutator, MutatorSequence

    env_cfg = cfg.env
    weights = env_cfg.rewards
    envs = []
    for _ in range(count):
        envs.append(
            RLGym(
                state_mutator=MutatorSequence(
                    FixedTeamSizeMutator(blue_size=env_cfg.blue_size, orange_size=env_cfg.orange_size),
                    KickoffMutator(),
                ),
                obs_builder=DefaultObs(zero_padding=None),
                action_parser=RepeatAction(LookupTableAction(), repeats=env_cfg.tick_skip),
                reward_fn=CombinedReward(
                    (GoalReward(), float(weights.get("goal", 10.0))), (TouchReward(), float(weights.get("touch", 1.0)))
                ),
                termination_cond=GoalCondition(),
                truncation_cond=AnyCondition(
                    NoTouchTimeoutCondition(env_cfg.no_touch_timeout_seconds),
                    TimeoutCondition(env_cfg.timeout_seconds),
                ),
                transition_engine=RocketSimEngine(rlbot_delay=env_cfg.action_delay_ticks > 0),
            )
        )
    return envs


class RLGymLoop:
    """RLGym v2's own per-env loop over many envs, with one batched policy forward per step."""

    def __init__(self, cfg: Config, count: int) -> None:
        self.envs = _make_rlgym_envs(cfg, count)
        self.obs: list[dict[Any, Any]] = [env.reset() for env in self.envs]
        self.agents = [list(obs) for obs in self.obs]
        self.num_agents = sum(len(a) for a in self.agents)
        self.obs_dim = int(next(iter(self.obs[0].values())).shape[0])
        self.model = ActorCritic(self.obs_dim, 90, cfg.ppo.policy_layers, cfg.ppo.critic_layers)
        self.rng = np.random.default_rng(0)

    @torch.no_grad()
    def step(self, inference: bool) -> int:
        if inference:
            batch = np.stack([obs[a] for obs, agents in zip(self.obs, self.agents, strict=True) for a in agents])
            actions = self.model.act(torch.as_tensor(batch, dtype=torch.float32))[0].numpy()
        else:
            actions = self.rng.integers(0, 90, self.num_agents)
        row = 0
        for i, env in enumerate(self.envs):
            chosen = {agent: actions[row + j : row + j + 1] for j, agent in enumerate(self.agents[i])}
            row += len(chosen)
            obs, _rewards, terminated, truncated = env.step(chosen)
            if any(terminated.values()) or any(truncated.values()):
                obs = env.reset()
            self.obs[i] = obs
        return self.num_agents

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _bench_config(preset: str, arenas: int | None, overrides: list[str]) -> Config:
    sets = list(overrides)
    if arenas is not None:
        sets.append(f"env.num_arenas={arenas}")
    sets += ["run.tensorboard=false", "run.device=cpu"]
    # fewer arenas or steps can make the rollout smaller than the preset's minibatch: shrink it then
    probe = resolve_config(preset, None, [*sets, "ppo.minibatch_size=1"])
    wanted = resolve_config(preset, None, []).ppo.minibatch_size
    for text in sets:
        if text.startswith("ppo.minibatch_size="):
            wanted = int(text.split("=", 1)[1])
    return resolve_config(preset, None, [*sets, f"ppo.minibatch_size={min(wanted, probe.batch_size)}"])


def _drivable_by_workers(cfg: Config) -> tuple[Config, list[Requirement]]:
    """``cfg`` with every setting worker processes cannot drive turned off (each requirement's own
    overrides, e.g. ``ppo.kickstart_coef=0``), and the requirements so dropped (the same rule as
    :func:`~speedflip.collect.choose_collector`'s)."""
    dropped = missing_capabilities("multiprocess", required_capabilities(cfg))
    if not dropped:
        return cfg, []
    if not all(r.overrides for r in dropped):  # e.g. env.rlgym: no setting to turn off, no worker figures
        raise ConfigError(unsupported_message("multiprocess", dropped))
    data = apply_overrides(config_to_dict(cfg), [o for r in dropped for o in r.overrides])
    return build_config(data, "the bench's worker-process config"), dropped


def _with(cfg: Config, **run: Any) -> Config:
    return cfg.model_copy(update={"run": cfg.run.model_copy(update=run)})


def _with_arenas(cfg: Config, arenas: int) -> Config:
    return cfg.model_copy(update={"env": cfg.env.model_copy(update={"num_arenas": arenas})})


def measure_group(
    configs: dict[str, Config], seconds: float, rounds: int = 3, say: Callable[[str], None] | None = None
) -> dict[str, dict[str, Any]]:
    """Collection agent-steps/s of several configs, measured in interleaved rounds.

    Every config gets a trainer (its env and policy) up front; then each round runs ``Trainer.collect``
    of every config for ``seconds / rounds`` (at least one rollout), with torch's thread count set
    to what the config's trainer chose before each. Returns ``{name: {"agent_sps", "other_load_cores",
    "backend", "workers", "arenas", "agents"}}``.
    """
    from speedflip.train.trainer import Trainer

    cores = os.cpu_count() or 1
    trainers: dict[str, Any] = {}
    threads: dict[str, int] = {}  # torch threads as each trainer set them (run.torch_threads or its default)
    measures = {name: Measure(name) for name in configs}
    try:
        for name, cfg in configs.items():
            if say is not None:
                say(f"building {name}")
            trainers[name] = Trainer(cfg)
            threads[name] = torch.get_num_threads()
        for r in range(rounds):
            if say is not None:
                say(f"round {r + 1}/{rounds}")
            for name in configs:
                torch.set_num_threads(threads[name])
                trainer = trainers[name]
                _run_for(seconds / rounds, partial(_collect_once, trainer), measures[name], _worker_pids(trainer.env))
        out: dict[str, dict[str, Any]] = {}
        for name, cfg in configs.items():
            env = trainers[name].env
            out[name] = {
                "agent_sps": measures[name].sps,
                "other_load_cores": measures[name].other_load,
                "backend": "multiprocess" if isinstance(env, MultiProcessVecEnv) else "inprocess",
                "workers": env.num_workers if isinstance(env, MultiProcessVecEnv) else 0,
                "arenas": cfg.env.num_arenas,
                "agents": env.num_agents,
                "team_size": f"{cfg.env.blue_size}v{cfg.env.orange_size}",
                "torch_threads": threads[name],
                "physics_threads": cfg.run.num_threads or cores,
            }
        return out
    finally:
        for trainer in trainers.values():
            trainer.close()


def bench_config(preset: str = "1v1", arenas: int | None = None, overrides: list[str] | None = None) -> Config:
    """The config a benchmark measures: a preset with overrides, CPU, no TensorBoard; the minibatch is
    shrunk if fewer arenas made the rollout smaller than it."""
    return _bench_config(preset, arenas, overrides or [])


# ---------------------------------------------------------------------- the benchmark


@dataclass
class BenchOptions:
    """What ``speedflip bench`` measures and for how long."""

    seconds: float = 5.0  # per measurement (spread over the rounds)
    arenas: int | None = None  # default: the preset's
    preset: str = "1v1"
    overrides: list[str] = field(default_factory=list)
    rounds: int = 3
    rlgym: bool = True
    scaling: bool = True
    peer: str | None = None  # "rlgym-learn": also run that trainer (see benchmarks/peer_rlgym_learn.py)
    peer_venv: str | None = None  # default: $SPEEDFLIP_PEER_VENV, else benchmarks/.peer-venv
    peer_seconds: float = 150.0  # wall time of each peer run (its first PPO iteration is not counted)
    peer_procs: int = 4  # rlgym-learn env processes (one env each); the fastest of 2, 4, 8 in single runs on 2 cores


PEERS = ("rlgym-learn",)
PEER_SCRIPT = "peer_rlgym_learn.py"


class PeerUnavailableError(ConfigError):
    """The peer trainer cannot run here (no checkout with its script, or no virtualenv for it)."""


def _peer_module(venv: str | None) -> tuple[Any, Path]:
    """The peer script (loaded from the source checkout's ``benchmarks/``) and the virtualenv to run it in.

    Raises :class:`PeerUnavailableError` with what to do when either is missing.
    """
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    script = root / "benchmarks" / PEER_SCRIPT
    if not script.is_file():
        raise PeerUnavailableError(
            f"--peer needs a source checkout of speedflip: {script} not found (the peer script is not installed "
            "with the package)"
        )
    env = Path(venv or os.environ.get("SPEEDFLIP_PEER_VENV") or root / "benchmarks" / ".peer-venv")
    python = env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if not python.exists():
        raise PeerUnavailableError(
            f"no peer virtualenv at {env}: create it with `make peer-venv` in {root} (a separate venv with "
            "torch==2.13.0, rlgym-learn==1.0.5, rlgym-learn-algos==0.2.6, rlgym[rl-sim] and wandb), or point "
            "--peer-venv / $SPEEDFLIP_PEER_VENV at one"
        )
    spec = importlib.util.spec_from_file_location("speedflip_peer_rlgym_learn", script)
    if spec is None or spec.loader is None:
        raise PeerUnavailableError(f"cannot load {script}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, env


def peer_spec(cfg: Config, seconds: float, procs: int, trainer_threads: int) -> dict[str, Any]:
    """What the peer trainer runs: ``cfg``'s match, goal + touch weights, network, batch and PPO settings."""
    env, ppo = cfg.env, cfg.ppo
    if env.blue_size != env.orange_size:
        raise PeerUnavailableError("the rlgym-learn peer runs symmetric matches only")
    return {
        "seconds": seconds,
        "team_size": env.blue_size,
        "tick_skip": env.tick_skip,
        "timeout_seconds": env.timeout_seconds,
        "no_touch_timeout_seconds": env.no_touch_timeout_seconds,
        "goal_reward": float(env.rewards.get("goal", 10.0)),
        "touch_reward": float(env.rewards.get("touch", 1.0)),
        "policy_layers": list(ppo.policy_layers),
        "critic_layers": list(ppo.critic_layers),
        "batch_size": cfg.batch_size,  # agent steps per PPO iteration
        "minibatch_size": ppo.minibatch_size,  # samples per optimiser step
        "epochs": ppo.update_epochs,
        "learning_rate": ppo.learning_rate,
        "ent_coef": ppo.ent_coef,
        "n_proc": procs,
        "torch_threads": trainer_threads,
        "seed": cfg.run.seed,
    }


def run_bench(opts: BenchOptions, console: Console | None = None) -> dict[str, Any]:
    """Measure everything (see the module doc) and return the results as a JSON-able dict."""
    from speedflip.train.trainer import Trainer

    console = console or Console()
    cfg = _bench_config(opts.preset, opts.arenas, opts.overrides)
    cores = os.cpu_count() or 1
    plan = choose_collector(cfg)
    K, C, skip = cfg.env.num_arenas, cfg.env.num_cars, cfg.env.tick_skip
    rounds = max(opts.rounds, 1)
    per_round = opts.seconds / rounds
    say = console.log
    peer_module: Any = None
    peer_venv: Path | None = None
    if opts.peer is not None:
        if opts.peer not in PEERS:
            raise PeerUnavailableError(f"unknown peer {opts.peer!r}; known: {', '.join(PEERS)}")
        peer_module, peer_venv = _peer_module(opts.peer_venv)
        peer_spec(cfg, opts.peer_seconds, opts.peer_procs, 1)  # symmetric match? (fail before measuring)
    say(f"bench: preset {opts.preset} ({cfg.env.blue_size}v{cfg.env.orange_size}), {K} arenas, {cores} cores, "
        f"{opts.seconds:g} s per measurement over {rounds} rounds")  # fmt: skip

    # --- memory: RSS growth while building arenas (RocketSim and its meshes are loaded first)
    init_rocketsim(cfg.env.meshes_dir)
    rss0 = rss_bytes()
    physics = Arenas(K, cfg.env.blue_size, cfg.env.orange_size, skip, cfg.env.action_delay_ticks,
                     num_threads=cores, meshes_dir=cfg.env.meshes_dir)  # fmt: skip
    rss1 = rss_bytes()
    probe = RocketLeagueVecEnv(_with_arenas(cfg, 2 * K).env, seed=0)
    probe.reset()
    rss2 = rss_bytes()
    probe.close()
    del probe
    physics_1t = Arenas(K, cfg.env.blue_size, cfg.env.orange_size, skip, cfg.env.action_delay_ticks,
                        num_threads=1, meshes_dir=cfg.env.meshes_dir)  # fmt: skip

    say("building the collectors: in-process, multi-process, training, twice the arenas")
    watch, mp_watch = Stopwatch(), Stopwatch()
    ip = Trainer(_with(cfg, collector="inprocess"))
    # torch threads as the trainer sets them (run.torch_threads, or the trainer's default), and the
    # other natural choice (1 if that is more, else every core), measured alongside
    trainer_threads = torch.get_num_threads()
    alt_threads = 1 if trainer_threads != 1 else cores
    has_alt = alt_threads != trainer_threads
    say(
        f"torch threads: {trainer_threads} (the trainer's choice)"
        + (f", also measured with {alt_threads}" if has_alt else "")
    )
    ip_env = ip.env
    assert isinstance(ip_env, RocketLeagueVecEnv)
    instrument(ip_env, "step", "env_step", watch)
    instrument(ip_env.arenas, "step", "physics", watch)
    instrument(ip_env.obs_builder, "build", "obs", watch)
    instrument(ip_env.reward_fn, "__call__", "reward", watch)
    assert isinstance(ip.collector, ArenaCollector)
    for method in ("sample", "value"):  # the policy per step; the critic after the rollout and at truncations
        instrument(ip.collector.model, method, "inference", watch)
    # worker processes cannot drive everything a config may need (the rule bot reads the arena state, which
    # stays in them: the kickstart's labels and the rule bot in pool arenas); training refuses such a pair, so
    # the worker-process figures run with each of those settings turned off, and the report says which
    mp_cfg, dropped = _drivable_by_workers(_with(cfg, collector="multiprocess"))
    kickstart_note: str | None = None
    if dropped:
        kickstart_note = (
            f"in-process collection and training run with {' and '.join(r.setting for r in dropped)}; the "
            f"worker-process figures are measured without them ({'; '.join(r.turn_off for r in dropped)}: "
            f"{', '.join(sorted({unsupported_reason('multiprocess', r.capability) for r in dropped}))})"
        )
        say(kickstart_note)
    mp = Trainer(mp_cfg)
    mp_env = mp.env
    assert isinstance(mp_env, MultiProcessVecEnv)
    instrument(mp_env, "step", "env_step", mp_watch)
    assert isinstance(mp.collector, ArenaCollector)
    for method in ("sample", "value"):  # the policy per step; the critic after the rollout and at truncations
        instrument(mp.collector.model, method, "inference", mp_watch)
    trainer = Trainer(cfg)  # what `speedflip train` would build
    # end to end, the trainer is also measured with the other of in process and pipelined (two groups of worker
    # processes), where that can drive the config, alternated with it round by round
    other_backend: str | None = None
    if plan.backend == "pipelined":
        other_backend = "inprocess"
    elif K >= 2 and not missing_capabilities("pipelined", required_capabilities(cfg)):
        other_backend = "pipelined"
    other = Trainer(_with(cfg, collector=other_backend, num_workers=0)) if other_backend is not None else None
    pipelined = trainer if plan.backend == "pipelined" else other if other_backend == "pipelined" else None
    big = Trainer(_with_arenas(cfg, 2 * K)) if opts.scaling else None

    rlgym: RLGymLoop | None = None
    rlgym_rss: float | None = None
    if opts.rlgym:
        say("building the RLGym v2 envs")
        for env in _make_rlgym_envs(cfg, 1):  # imports RLGym before memory is measured
            env.close()
        before = rss_bytes()
        rlgym = RLGymLoop(cfg, K)
        after = rss_bytes()
        if before is not None and after is not None:
            rlgym_rss = (after - before) / K

    m = {name: Measure(name) for name in (
        "physics", "physics_1thread", "collect_inprocess", "collect_multiprocess", "collect_inprocess_alt",
        "collect_multiprocess_alt", "rlgym", "rlgym_alt", "rlgym_env_only", "collect_2x_arenas", "train",
        "env_only_inprocess", "env_only_multiprocess", "collect_pipelined", "train_other",
    )}  # fmt: skip
    learn_seconds = 0.0

    def physics_step(arenas: Arenas) -> Callable[[], int]:
        def run() -> int:
            arenas.step_physics_only(skip)
            return K * C

        return run

    def iteration() -> int:
        nonlocal learn_seconds
        batch, raw_obs, stats = trainer.collect()
        start = time.perf_counter()
        trainer.update(batch, raw_obs)
        learn_seconds += time.perf_counter() - start
        return int(stats.steps)

    def other_iteration() -> int:
        assert other is not None
        batch, raw_obs, stats = other.collect()
        other.update(batch, raw_obs)
        return int(stats.steps)

    try:
        for r in range(rounds):
            say(f"round {r + 1}/{rounds}")
            _run_for(per_round, physics_step(physics), m["physics"])
            _run_for(per_round / 2, physics_step(physics_1t), m["physics_1thread"])
            watch.enabled = mp_watch.enabled = True
            _run_for(per_round, partial(_collect_once, ip), m["collect_inprocess"])
            _run_for(per_round, partial(_collect_once, mp), m["collect_multiprocess"], _worker_pids(mp_env))
            watch.enabled = mp_watch.enabled = False
            if has_alt:
                with torch_threads(alt_threads):
                    _run_for(per_round, partial(_collect_once, ip), m["collect_inprocess_alt"])
                    _run_for(per_round, partial(_collect_once, mp), m["collect_multiprocess_alt"], _worker_pids(mp_env))
                    if rlgym is not None:
                        _run_for(per_round, partial(rlgym.step, True), m["rlgym_alt"])
            if pipelined is not None:
                pids = _worker_pids(pipelined.env)
                _run_for(per_round, partial(_collect_once, pipelined), m["collect_pipelined"], pids)
            if rlgym is not None:
                _run_for(per_round, partial(rlgym.step, True), m["rlgym"])
                _run_for(per_round / 2, partial(rlgym.step, False), m["rlgym_env_only"])
            _run_for(per_round / 2, EnvOnly(ip).step, m["env_only_inprocess"])
            _run_for(per_round / 2, EnvOnly(mp).step, m["env_only_multiprocess"], _worker_pids(mp_env))
            if big is not None:
                _run_for(per_round, partial(_collect_once, big), m["collect_2x_arenas"], _worker_pids(big.env))
            _run_for(per_round, iteration, m["train"], _worker_pids(trainer.env))
            if other is not None:  # alternated with the trainer above, round by round
                _run_for(per_round, other_iteration, m["train_other"], _worker_pids(other.env))
        worker_pss = [pss_bytes(pid) for pid in mp_env.pids if pid is not None]
    finally:
        for closable in (physics, physics_1t, ip, mp, trainer, big, rlgym, other):
            if closable is not None:
                closable.close()

    # --- the peer trainer, after everything above is closed (it needs the cores to itself)
    peer: dict[str, Any] | None = None
    if peer_module is not None and peer_venv is not None:
        peer = {"runs": {}}
        for threads in sorted({trainer_threads, alt_threads}):
            say(f"peer: rlgym-learn, {opts.peer_procs} env processes, torch threads {threads}, {opts.peer_seconds:g} s")
            run = peer_module.run_peer(peer_spec(cfg, opts.peer_seconds, opts.peer_procs, threads), peer_venv)
            if run.get("error"):
                say(f"peer run failed: {run['error']}")
            peer["runs"][str(threads)] = run
        scored = [(r["overall_agent_sps"], t) for t, r in peer["runs"].items() if r.get("overall_agent_sps")]
        best = max(scored) if scored else None
        peer["agent_sps"] = best[0] if best else None
        peer["torch_threads"] = int(best[1]) if best else None
        peer["other_load_cores"] = peer["runs"][best[1]].get("other_load_cores") if best else None
        peer["versions"] = next(iter(peer["runs"].values())).get("versions", {})

    # --- assemble
    phys = m["physics"].sps
    measured_backend = plan.backend if plan.backend in ("inprocess", "pipelined") else "multiprocess"
    auto_collect = m[f"collect_{measured_backend}"]

    def ratio(x: float | None, base: float | None) -> float | None:
        return x / base if x is not None and base else None

    def breakdown(totals: dict[str, float], measure: Measure) -> dict[str, float]:
        per_k = 1e6 / max(measure.steps, 1)  # seconds -> ms per 1000 agent steps
        out = {k: v * per_k for k, v in totals.items()}
        env_step = out.pop("env_step", 0.0)
        if "physics" in out:
            out["env_other"] = max(0.0, env_step - sum(out.get(k, 0.0) for k in ("physics", "obs", "reward")))
        else:
            out["env_workers"] = env_step
        out["trainer_bookkeeping"] = max(0.0, measure.seconds * per_k - env_step - out.get("inference", 0.0))
        out["learn"] = learn_seconds * 1e6 / max(m["train"].steps, 1)
        return out

    memory: dict[str, Any] = {
        "inprocess_mb_per_arena": (rss1 - rss0) / K / 2**20 if rss0 is not None and rss1 is not None else None,
        "inprocess_env_mb_per_arena_at_2x": (rss2 - rss1) / (2 * K) / 2**20
        if rss1 is not None and rss2 is not None
        else None,
        "multiprocess_worker_pss_mb": [p / 2**20 for p in worker_pss if p is not None],
        "rlgym_mb_per_env": rlgym_rss / 2**20 if rlgym_rss is not None else None,
    }
    known = memory["multiprocess_worker_pss_mb"]
    memory["multiprocess_mb_per_arena_incl_interpreters"] = sum(known) / K if known else None
    rl = m["rlgym"].sps if rlgym is not None else None
    results: dict[str, Any] = {
        "speedflip_version": __version__,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "cores": cores,
            "platform": platform.platform(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "torch_threads": trainer_threads,
            "numpy": np.__version__,
            "load_average_at_end": None if sys.platform == "win32" else list(os.getloadavg()),
        },
        "config": {
            "preset": opts.preset,
            "team_size": f"{cfg.env.blue_size}v{cfg.env.orange_size}",
            "num_arenas": K,
            "num_agents": K * C,
            "tick_skip": skip,
            "policy_layers": cfg.ppo.policy_layers,
            "critic_layers": cfg.ppo.critic_layers,
            "num_steps": cfg.ppo.num_steps,
            "minibatch_size": cfg.ppo.minibatch_size,
            "update_epochs": cfg.ppo.update_epochs,
            "update_precision": trainer.learner.precision,  # run.update_precision as resolved here
            "overrides": opts.overrides,
            "resolved": config_to_dict(cfg),
        },
        "seconds_per_measurement": opts.seconds,
        "rounds": rounds,
        "auto_backend": plan.backend,
        "auto_reason": plan.reason,
        "kickstart_note": kickstart_note,
        "workers": mp_env.num_workers,
        "physics_ticks_per_second": phys / C * skip,
        "physics_agent_sps": phys,
        "physics_agent_sps_1thread": m["physics_1thread"].sps,
        "collect_agent_sps": auto_collect.sps,
        "collect_agent_sps_by_backend": {
            "inprocess": m["collect_inprocess"].sps,
            "multiprocess": m["collect_multiprocess"].sps,
        },
        "torch_threads_alt": alt_threads if has_alt else None,
        "collect_agent_sps_alt_torch_by_backend": {
            "inprocess": m["collect_inprocess_alt"].sps,
            "multiprocess": m["collect_multiprocess_alt"].sps,
        }
        if has_alt
        else None,
        "collect_agent_sps_pipelined": m["collect_pipelined"].sps if pipelined is not None else None,
        "train_agent_sps": m["train"].sps,
        "train_agent_sps_by_backend": {
            plan.backend: m["train"].sps,
            **({other_backend: m["train_other"].sps} if other_backend is not None else {}),
        },
        "train_learn_seconds": learn_seconds,
        "rlgym_agent_sps": rl,
        "rlgym_agent_sps_alt_torch": m["rlgym_alt"].sps if rlgym is not None and has_alt else None,
        "rlgym_env_only_agent_sps": m["rlgym_env_only"].sps if rlgym is not None else None,
        "env_only_agent_sps_by_backend": {
            "inprocess": m["env_only_inprocess"].sps,
            "multiprocess": m["env_only_multiprocess"].sps,
        },
        "collect_agent_sps_2x_arenas": m["collect_2x_arenas"].sps if big is not None else None,
        "ratios_to_physics": {
            "collect": ratio(auto_collect.sps, phys),
            "collect_inprocess": ratio(m["collect_inprocess"].sps, phys),
            "collect_multiprocess": ratio(m["collect_multiprocess"].sps, phys),
            "train": ratio(m["train"].sps, phys),
            "collect_pipelined": ratio(m["collect_pipelined"].sps, phys) if pipelined is not None else None,
            "rlgym": ratio(rl, phys),
        },
        "collect_vs_rlgym": ratio(auto_collect.sps, rl),
        "collect_vs_rlgym_alt_torch": ratio(
            m[f"collect_{plan.backend}_alt"].sps if plan.backend != "pipelined" else None,
            m["rlgym_alt"].sps if rlgym is not None and has_alt else None,
        ),
        "breakdown_ms_per_1000_agent_steps": {
            "inprocess": breakdown(watch.totals, m["collect_inprocess"]),
            "multiprocess": breakdown(mp_watch.totals, m["collect_multiprocess"]),
        },
        "memory": memory,
        "other_load_cores": {name: measure.other_load for name, measure in m.items() if measure.seconds > 0},
        "peer_rlgym_learn_agent_sps": peer["agent_sps"] if peer is not None else None,
        "train_vs_peer_rlgym_learn": ratio(m["train"].sps, peer["agent_sps"]) if peer is not None else None,
        "peer_rlgym_learn": peer,
    }
    results["targets"] = _targets(results)
    return results


def _targets(r: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets (reported, not enforced): value, goal, met."""
    out: dict[str, Any] = {}
    ratio = r["ratios_to_physics"]["collect"]
    out["collect_ge_50pct_physics"] = {"value": ratio, "goal": 0.5, "met": ratio is not None and ratio >= 0.5}
    vs = r["collect_vs_rlgym"]
    out["collect_ge_4x_rlgym"] = {"value": vs, "goal": 4.0, "met": vs is not None and vs >= 4.0}
    mem = r["memory"]["inprocess_mb_per_arena"]
    out["memory_le_2mb_per_arena"] = {"value": mem, "goal": 2.0, "met": mem is not None and mem <= 2.0}
    big, base = r["collect_agent_sps_2x_arenas"], r["collect_agent_sps"]
    scale = big / base if big is not None and base else None
    # within 3 % counts as "not lower": that is below the run-to-run noise of this measurement
    out["doubling_arenas_keeps_sps"] = {"value": scale, "goal": 0.97, "met": scale is not None and scale >= 0.97}
    if r.get("peer_rlgym_learn") is not None:
        vs_peer = r.get("train_vs_peer_rlgym_learn")
        out["train_ge_3x_rlgym_learn"] = {"value": vs_peer, "goal": 3.0, "met": vs_peer is not None and vs_peer >= 3.0}
    return out


# ---------------------------------------------------------------------- output


def _fmt(x: float | None, spec: str = ",.0f") -> str:
    return "-" if x is None else format(x, spec)


def print_report(r: dict[str, Any], console: Console) -> None:
    """Rich tables: throughput vs the physics limit, the time breakdown, memory and the targets."""
    cfg = r["config"]
    load = r["other_load_cores"]
    phys = r["physics_agent_sps"]
    title = (
        f"speedflip bench: {cfg['team_size']}, {cfg['num_arenas']} arenas, policy {cfg['policy_layers']}, "
        f"{r['machine']['cores']} cores, torch threads {r['machine']['torch_threads']}, "
        f"update in {cfg.get('update_precision', 'float32')}"
    )
    table = Table(title=title, title_justify="left")
    for col in ("measurement", "agent steps/s", "of physics limit", "other load (cores)"):
        table.add_column(col, justify="left" if col == "measurement" else "right")
    workers = r["workers"]
    by_backend = r["collect_agent_sps_by_backend"]
    alt = r["collect_agent_sps_alt_torch_by_backend"] or {"inprocess": None, "multiprocess": None}
    alt_threads = r["torch_threads_alt"]
    rows = [
        ("physics limit (all cores, raw Arena.step)", phys, "physics"),
        ("physics, one thread", r["physics_agent_sps_1thread"], "physics_1thread"),
        ("collect: in-process threads", by_backend["inprocess"], "collect_inprocess"),
        (f"collect: {workers} worker processes", by_backend["multiprocess"], "collect_multiprocess"),
        (f"collect: in-process threads, torch threads {alt_threads}", alt["inprocess"], "collect_inprocess_alt"),
        (f"collect: {workers} worker processes, torch threads {alt_threads}", alt["multiprocess"],
         "collect_multiprocess_alt"),
        ("collect: pipelined worker groups (run.collector=pipelined)", r["collect_agent_sps_pipelined"],
         "collect_pipelined"),
        (f"train end to end ({r['auto_backend']})", r["train_agent_sps"], "train"),
        *[
            (f"train end to end (run.collector={name})", sps, "train_other")
            for name, sps in r["train_agent_sps_by_backend"].items()
            if name != r["auto_backend"]
        ],
        ("RLGym v2 loop + same inference", r["rlgym_agent_sps"], "rlgym"),
        (f"RLGym v2 loop + same inference, torch threads {alt_threads}", r["rlgym_agent_sps_alt_torch"], "rlgym_alt"),
        ("speedflip env only (random actions): in-process", r["env_only_agent_sps_by_backend"]["inprocess"],
         "env_only_inprocess"),
        (f"speedflip env only (random actions): {workers} workers", r["env_only_agent_sps_by_backend"]["multiprocess"],
         "env_only_multiprocess"),
        ("RLGym v2 loop, env only", r["rlgym_env_only_agent_sps"], "rlgym_env_only"),
        (f"collect with {2 * cfg['num_arenas']} arenas ({r['auto_backend']})", r["collect_agent_sps_2x_arenas"],
         "collect_2x_arenas"),
    ]  # fmt: skip
    peer = r.get("peer_rlgym_learn")
    if peer is not None:
        version = peer.get("versions", {}).get("rlgym-learn", "?")
        procs = next(iter(peer["runs"].values()))["spec"]["n_proc"]
        load = {**load, "peer_rlgym_learn": peer.get("other_load_cores")}
        rows.append((f"peer: rlgym-learn {version} PPO train ({procs} env processes, torch threads "
                     f"{peer.get('torch_threads') or '-'})", peer.get("agent_sps"), "peer_rlgym_learn"))  # fmt: skip
    for label, sps, key in rows:
        pct = f"{sps / phys:.0%}" if sps is not None and phys else "-"
        table.add_row(label, _fmt(sps), pct, _fmt(load.get(key), ".2f"))
    console.print(table)
    if peer is not None:
        per_threads = ", ".join(
            f"torch threads {t}: {_fmt(run.get('overall_agent_sps'))} ({run.get('iterations_used', 0)} iterations)"
            for t, run in peer["runs"].items()
        )
        console.print(
            f"peer rlgym-learn overall agent steps/s by torch threads: {per_threads}; "
            f"train / peer = {_fmt(r.get('train_vs_peer_rlgym_learn'), '.2f')}x",
            soft_wrap=True,
        )
    console.print(f"physics: {r['physics_ticks_per_second']:,.0f} arena ticks/s; auto collector: {r['auto_reason']}")
    if r.get("kickstart_note"):
        console.print(r["kickstart_note"], soft_wrap=True)

    bd = Table(title="where the time goes (ms per 1000 agent steps)", title_justify="left")
    bd.add_column("part")
    keys = ["physics", "obs", "reward", "env_other", "env_workers", "inference", "trainer_bookkeeping", "learn"]
    labels = {
        "physics": "physics + state export",
        "obs": "observations",
        "reward": "rewards",
        "env_other": "env: actions, dones, resets",
        "env_workers": "env step in workers (waiting)",
        "inference": "inference (policy + value)",
        "trainer_bookkeeping": "trainer: normalise, buffers, GAE",
        "learn": "PPO update",
    }
    if r["config"]["resolved"]["run"]["overlap_collection"]:  # the update ran in a thread during collection's time
        labels["learn"] = "PPO update (inside collection: run.overlap_collection)"
    backends = list(r["breakdown_ms_per_1000_agent_steps"])
    for b in backends:
        bd.add_column(b, justify="right")
        bd.add_column("share", justify="right")
    for key in keys:
        cells = []
        for b in backends:
            parts = r["breakdown_ms_per_1000_agent_steps"][b]
            total = sum(parts.values())
            value = parts.get(key)
            cells += [_fmt(value, ".1f"), f"{value / total:.0%}" if value is not None and total else "-"]
        bd.add_row(labels[key], *cells)
    console.print(bd)

    mem = r["memory"]
    console.print(
        f"memory: {_fmt(mem['inprocess_mb_per_arena'], '.2f')} MB per arena in process; workers "
        f"{', '.join(_fmt(p, '.0f') for p in mem['multiprocess_worker_pss_mb'])} MB PSS each "
        f"({_fmt(mem['multiprocess_mb_per_arena_incl_interpreters'], '.2f')} MB per arena incl. interpreters); "
        f"RLGym {_fmt(mem['rlgym_mb_per_env'], '.2f')} MB per env",
        soft_wrap=True,
    )
    tg = Table(title="targets (reported, not enforced)", title_justify="left")
    for col in ("target", "value", "goal", "met"):
        tg.add_column(col)
    for name, t in r["targets"].items():
        tg.add_row(name, _fmt(t["value"], ".2f"), f"{t['goal']:g}", "yes" if t["met"] else "no")
    console.print(tg)
    busy = [v for v in load.values() if v is not None and v > 0.2]
    if busy:
        console.print(
            f"[yellow]note:[/yellow] other processes used up to {max(busy):.2f} cores during the run; "
            "the figures are lower than on an idle machine.",
            soft_wrap=True,
        )


def write_json(results: dict[str, Any], path: str | Path) -> Path:
    """Write the results (pretty JSON); returns the path."""
    out = Path(path)
    if out.parent != Path():
        out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=float) + "\n")
    return out


# ---------------------------------------------------------------------- speedflip bench --collector ray
RAY_BENCH_ACTORS = (1, 2)


def _train_for(trainer: Any, seconds: float, warmup_iterations: int = 2) -> dict[str, Any]:
    """Train (collect + update, as `speedflip train` does) for ``seconds`` after ``warmup_iterations``;
    the agent steps per second and the means of the collector's per-iteration figures."""
    for _ in range(warmup_iterations):
        batch, raw_obs, _ = trainer.collect()
        trainer.update(batch, raw_obs)
    steps, updates, figures = 0, [], []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        batch, raw_obs, stats = trainer.collect()
        metrics = trainer.update(batch, raw_obs)
        steps += stats.steps
        updates.append(metrics["update_seconds"] / stats.steps)
        figures.append(trainer.collector.metrics())
    elapsed = time.perf_counter() - start
    out: dict[str, Any] = {
        "agent_sps": steps / elapsed,
        "iterations": len(updates),
        "update_seconds_per_agent_step": float(np.mean(updates)),
        "steps_per_rollout": stats.steps,
    }
    for key in sorted({k for f in figures for k in f}):
        values = [f[key] for f in figures if f.get(key) is not None]
        if values:
            out[key] = float(np.mean(values)) if not key.startswith("health/") else float(values[-1])
    return out


def run_ray_bench(opts: BenchOptions, console: Console | None = None) -> dict[str, Any]:
    """``speedflip bench --collector ray``: end-to-end training speed with the in-process collector and
    with 1 and 2 Ray actors (a local cluster on this machine), the same config; what goes over the
    network per update and per rollout; and, from those figures, the limits of N machines."""
    from speedflip.collect.ray_collector import import_ray
    from speedflip.train.trainer import Trainer

    console = console or Console()
    ray = import_ray()
    cfg = _bench_config(opts.preset, opts.arenas, opts.overrides)
    cores = os.cpu_count() or 1
    say = console.log
    runs: dict[str, dict[str, Any]] = {}
    say(f"bench --collector ray: preset {opts.preset}, {cfg.env.num_arenas} arenas per collector, {cores} cores, "
        f"{opts.seconds:g} s of training each")  # fmt: skip
    trainer = Trainer(_with(cfg, collector="inprocess"))
    try:
        runs["inprocess"] = _train_for(trainer, opts.seconds)
    finally:
        trainer.close()
    ray.init(
        address="local",
        num_cpus=cores,
        include_dashboard=False,
        configure_logging=False,
        log_to_driver=False,
        _system_config={"worker_niceness": 0},  # Ray's default 15 would let the learner starve the actors
    )
    try:
        for actors in RAY_BENCH_ACTORS:
            if actors > cores:
                continue
            say(f"{actors} Ray actor(s)")
            trainer = Trainer(_with(cfg, collector="ray", ray_actors=actors, max_policy_lag=actors))
            try:
                runs[f"ray_{actors}"] = _train_for(trainer, opts.seconds)
            finally:
                trainer.close()
    finally:
        ray.shutdown()
    return {"preset": opts.preset, "arenas_per_collector": cfg.env.num_arenas, "cores": cores, "runs": runs,
            "paper": ray_limits(runs)}  # fmt: skip


def ray_limits(runs: dict[str, dict[str, Any]], cores_per_machine: int = 16) -> dict[str, float | None]:
    """On paper, from the measured figures: how many 1-CPU actors one learner can feed and the bandwidth
    it needs (the arithmetic is in docs/distributed.md)."""
    one = runs.get("ray_1")
    if not one or not one.get("perf/actor_collect_seconds"):
        return {}
    steps = float(one["steps_per_rollout"])
    actor_sps = steps / one["perf/actor_collect_seconds"]  # one actor, one CPU, collecting alone
    learner_sps = 1.0 / one["update_seconds_per_agent_step"]  # this machine's CPU learner
    rollout_bytes_per_step = one["perf/rollout_bytes"] / steps
    updates_per_second = learner_sps / steps
    machines = learner_sps / (actor_sps * cores_per_machine)
    return {
        "actor_agent_sps": actor_sps,
        "learner_agent_sps": learner_sps,
        "actors_one_learner_feeds": learner_sps / actor_sps,
        "machines_of_16_cores_one_learner_feeds": machines,
        "rollout_bytes_per_agent_step": rollout_bytes_per_step,
        "learner_ingress_bytes_per_second": learner_sps * rollout_bytes_per_step,
        "weights_bytes": one.get("perf/weights_bytes"),
        "updates_per_second": updates_per_second,
        "weights_egress_bytes_per_second_per_node": (one.get("perf/weights_bytes") or 0.0) * updates_per_second,
    }


def print_ray_report(r: dict[str, Any], console: Console) -> None:
    """The table of :func:`run_ray_bench`."""
    table = Table(title=f"speedflip bench --collector ray ({r['preset']}, {r['arenas_per_collector']} arenas per "
                  f"collector, {r['cores']} cores)")  # fmt: skip
    for column in ("collector", "agent steps/s", "update s/iter", "wait s/iter", "weights KB", "put ms",
                   "rollout KB", "get ms", "lag", "dropped"):  # fmt: skip
        table.add_column(column, justify="right")
    for name, m in r["runs"].items():
        table.add_row(
            name, _fmt(m["agent_sps"]), _fmt(m["update_seconds_per_agent_step"] * m["steps_per_rollout"], ".3f"),
            _fmt(m.get("perf/rollout_wait_seconds"), ".3f"), _fmt(_kb(m.get("perf/weights_bytes")), ",.1f"),
            _fmt(_ms(m.get("perf/weights_put_seconds")), ".2f"), _fmt(_kb(m.get("perf/rollout_bytes")), ",.1f"),
            _fmt(_ms(m.get("perf/rollout_get_seconds")), ".2f"), _fmt(m.get("perf/policy_lag"), ".2f"),
            _fmt(m.get("health/dropped_stale_rollouts"), ".0f"),
        )  # fmt: skip
    console.print(table)
    p = r["paper"]
    if p:
        console.print(
            f"on paper: one actor collects {p['actor_agent_sps']:,.0f} agent steps/s, this learner trains "
            f"{p['learner_agent_sps']:,.0f}: it feeds {p['actors_one_learner_feeds']:.1f} actors "
            f"({p['machines_of_16_cores_one_learner_feeds']:.2f} machines of 16 cores) and then receives "
            f"{p['learner_ingress_bytes_per_second'] / 1e6:,.1f} MB/s of rollouts; weights out: "
            f"{p['weights_egress_bytes_per_second_per_node'] / 1e6:,.2f} MB/s per node (docs/distributed.md)",
            soft_wrap=True,
        )


def _kb(x: float | None) -> float | None:
    return None if x is None else x / 1024


def _ms(x: float | None) -> float | None:
    return None if x is None else x * 1000
