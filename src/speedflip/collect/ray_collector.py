"""Rollouts from Ray actors on one machine or a cluster (``run.collector: ray``; docs/distributed.md).

Each actor (:class:`CollectorActor`) owns an in-process :class:`~speedflip.collect.arena_collector.ArenaCollector`
(its ``env.num_arenas`` arenas and a CPU copy of the policy), built from the run's resolved config, so
every node runs the same environment code as a one-machine run. The learner stays where
``speedflip train`` runs. One iteration of :meth:`RayCollector.collect`:

1. the learner's weights go into Ray's object store once per update (``ray.put``), tagged with their
   version; every actor task gets the reference, so each node fetches them once;
2. the first finished rollout is taken; its games against the opponent pool are rated here, once,
   by the learner's matchmaker (``league.json``, ``games.csv``);
3. a rollout acted by weights more than ``run.max_policy_lag`` updates old is dropped (counted as
   ``health/dropped_stale_rollouts``) and its actor collects again with the newest weights;
4. with ``max_policy_lag >= 1`` the actor starts its next rollout at once, so collection overlaps the
   update (PPO's ratio against the behaviour log-probabilities corrects for the lag).

Faults: an actor whose process or node dies is restarted by Ray (``max_restarts`` =
``run.max_worker_restarts``, its unfinished task retried), and the others go on meanwhile; a restart
shows as a new process id of that actor (``health/actor_restarts``). Every actor checks at start that
its node runs the learner's Python, speedflip (version and source digest) and RocketSim; a node that
differs is refused with the versions of both sides.

Ray is optional (``pip install 'speedflip[ray]'``) and imported only here, only when a run asks for it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from speedflip import __version__
from speedflip._types import Array
from speedflip.collect import RAY_INSTALL_MESSAGE
from speedflip.collect.arena_collector import ArenaCollector
from speedflip.config import Config, ConfigError
from speedflip.env.actions import LookupTableAction
from speedflip.env.vec_env import StepResult
from speedflip.errors import RunStoppedError
from speedflip.models.build import PolicyModel, build_policy_model
from speedflip.rollout import PolicyWeights, Rollout, merge_rollouts
from speedflip.schedule import stage_config, stage_opponent_share
from speedflip.selfplay.matchmaker import LEARNER, Matchmaker

ACTOR_START_TIMEOUT_SECONDS = 300.0  # building arenas and importing torch on a busy node takes a while
_SEED_STRIDE = 7919  # actor i collects with run.seed + i * stride (actor 0 with the run's own seed)


def import_ray() -> Any:
    """The ``ray`` module, or a :class:`~speedflip.config.ConfigError` that says how to install it."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise ConfigError(RAY_INSTALL_MESSAGE) from None


# ---------------------------------------------------------------------- versions every node must share
@lru_cache(maxsize=1)
def source_digest() -> str:
    """SHA-256 (12 hex digits) of speedflip's own source files and presets as installed on this node."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted([*root.rglob("*.py"), *root.glob("presets/*.yaml")]):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def node_versions() -> dict[str, str]:
    """What must be the same on every node: Python, speedflip (with its source digest), the physics."""
    return {
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "speedflip": f"{__version__} (source {source_digest()})",
        "rocketsim": _dist_version("rocketsim"),
        "rlgym-rocket-league": _dist_version("rlgym-rocket-league"),
    }


def version_mismatch(expected: dict[str, str], actual: dict[str, str], where: str) -> str | None:
    """A message naming every package whose version differs between the learner and ``where``; None if none."""
    differ = [name for name in expected if actual.get(name) != expected[name]]
    if not differ:
        return None
    both = "; ".join(f"{name} {actual.get(name, 'missing')} there, {expected[name]} on the learner" for name in differ)
    return (
        f"{where} runs other versions than the learner ({both}). A run never mixes them (other physics or "
        "env code would train on different worlds): install the learner's versions on that node (the same "
        "speedflip checkout or wheel, rocketsim, rlgym-rocket-league, Python) and restart its `ray start`, "
        "or leave the node out of the cluster"
    )


# ---------------------------------------------------------------------- the actor
def actor_config(cfg: Config, index: int) -> Config:
    """The config actor ``index`` builds its arenas from: the run's, collected in process with its own seed."""
    threads = max(1, int(cfg.run.ray_cpus_per_actor))
    run = cfg.run.model_copy(
        update={
            "collector": "inprocess",
            "seed": (cfg.run.seed + _SEED_STRIDE * index) % 2**32,
            "num_threads": threads,
            "torch_threads": cfg.run.torch_threads or 1,
        }
    )
    return cfg.model_copy(update={"run": run})


@dataclass
class TaskSettings:
    """What an actor applies before a rollout; sent whole with every task, so a restarted actor needs nothing else."""

    global_step: int
    reward_weights: dict[str, float] | None
    mechanics_active: bool | None
    ratings: dict[str, float]  # the learner's Elo of the learner and of every pool member
    snapshots: list[tuple[str, int, Any]]  # (stage name, step, object ref of the milestone's files)
    torch_rng_state: torch.Tensor | None = None  # actor 0, once: continue the learner's acting stream
    env_rng_state: dict[str, Any] | None = None  # actor 0, once after a resume: the checkpoint's arena streams


class CollectorActor:
    """A Ray actor around one :class:`ArenaCollector` (wrapped with ``ray.remote`` by :class:`RayCollector`)."""

    def __init__(self, cfg: Config, stage: int, index: int, expected_versions: dict[str, str]) -> None:
        ray = import_ray()
        self.index = index
        self.pid = os.getpid()
        self.node_id: str = ray.get_runtime_context().get_node_id()
        self.node_ip: str = ray.util.get_node_ip_address()
        self.versions = node_versions()
        self.refusal = version_mismatch(
            expected_versions, self.versions, f"node {self.node_ip} (Ray actor {index})"
        )  # checked before anything of the run is built
        self.collector: ArenaCollector | None = None
        self.snapshot_root = Path(tempfile.mkdtemp(prefix=f"speedflip-actor{index}-"))
        self.snapshots_added: set[str] = set()
        self.applied_rewards: dict[str, float] | None = None
        self.applied_mechanics: bool | None = None
        if self.refusal is not None:
            return
        own = actor_config(cfg, index)
        torch.set_num_threads(own.run.torch_threads)
        torch.manual_seed(own.run.seed)
        env_cfg = stage_config(own, stage).env

        def model_factory(obs_dim: int, num_actions: int) -> PolicyModel:
            return build_policy_model(own, obs_dim, num_actions, env_cfg.action_form, env_cfg.action_bins)

        self.collector = ArenaCollector(own, stage, model_factory, torch.device("cpu"), None)

    def hello(self) -> dict[str, Any]:
        """Who and where this actor is, its versions (or its refusal) and the shape of its arenas."""
        info: dict[str, Any] = {
            "index": self.index, "pid": self.pid, "node_id": self.node_id, "node_ip": self.node_ip,
            "versions": self.versions, "refusal": self.refusal, "niceness": os.nice(0),
        }  # fmt: skip
        if self.collector is not None:
            env = self.collector.env
            info.update(
                obs_dim=env.obs_dim, num_actions=env.num_actions, num_arenas=env.num_arenas, num_cars=env.num_cars,
                num_agents=env.num_agents, table=env.actions.table, car_teams=self.collector.car_teams,
                notes=self.collector.notes, rng_state=self.collector.rng_state(),
            )  # fmt: skip
        return info

    def collect(self, weights: PolicyWeights, settings: TaskSettings) -> tuple[Rollout, dict[str, Any]]:
        """One rollout acted by ``weights`` (resolved by Ray from the object store) and what the learner
        needs besides: the finished pool games, the arenas' RNG state, who collected it."""
        if self.collector is None:
            raise RuntimeError(self.refusal or "the actor has no collector")
        collector = self.collector
        self._apply(settings)
        rollout = collector.collect(weights, settings.global_step)
        mm = collector.matchmaker
        games = mm.take_pending_games()  # rated on the learner, not here
        info = {
            "index": self.index, "pid": self.pid, "node_id": self.node_id, "node_ip": self.node_ip,
            "games": games, "rng_state": collector.rng_state(),
            "discarded_rollouts": collector.total_discarded_rollouts,
        }  # fmt: skip
        return rollout, info

    def _apply(self, s: TaskSettings) -> None:
        assert self.collector is not None
        collector, ray = self.collector, import_ray()
        env = collector.env
        if s.reward_weights is not None and s.reward_weights != self.applied_rewards:
            env.set_reward_weights(s.reward_weights)
            self.applied_rewards = s.reward_weights
        if s.mechanics_active is not None and s.mechanics_active != self.applied_mechanics:
            env.set_mechanics_active(s.mechanics_active)
            self.applied_mechanics = s.mechanics_active
        if s.torch_rng_state is not None:
            torch.set_rng_state(s.torch_rng_state)
        if s.env_rng_state is not None:
            # a checkpoint of another backend's arenas does not fit: they keep their own streams then
            with contextlib.suppress(KeyError, ValueError, TypeError, IndexError):
                env.set_rng_state(s.env_rng_state)
        mm = collector.matchmaker
        for stage_name, step, ref in s.snapshots:
            name = f"{stage_name}@{step}"
            if name in self.snapshots_added:
                continue
            folder = self.snapshot_root / "milestones" / stage_name / str(step)
            folder.mkdir(parents=True, exist_ok=True)
            for file_name, data in ray.get(ref).items():
                (folder / file_name).write_bytes(data)
            mm.add_snapshot(folder)
            self.snapshots_added.add(name)
        for name, rating in s.ratings.items():
            mm.league.player(name).rating = rating

    def close(self) -> None:
        """Close the arenas and remove the milestone copies."""
        if self.collector is not None:
            self.collector.close()
        shutil.rmtree(self.snapshot_root, ignore_errors=True)


# ---------------------------------------------------------------------- the learner's side
class LearnerMatchmaker(Matchmaker):
    """The learner's matchmaker with ``run.collector: ray``: it owns ``league.json`` and ``games.csv``
    and rates the games the actors report, once each, in the order they arrive. Actors sample their
    opponents with its ratings and play the milestones it ships to them (:attr:`shipped`)."""

    def __init__(self, *args: Any, put: Any, **kwargs: Any) -> None:
        self.put = put  # ray.put
        self.shipped: dict[str, tuple[str, int, Any]] = {}  # member name -> (stage name, step, files ref)
        super().__init__(*args, **kwargs)

    def add_snapshot(self, path: Path) -> None:
        super().add_snapshot(path)
        name = f"{path.parent.name}@{path.name}"
        if any(m.name == name for m in self.members) and name not in self.shipped:
            files = {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.is_file()}
            self.shipped[name] = (path.parent.name, int(path.name), self.put(files))

    def snapshots(self) -> list[tuple[str, int, Any]]:
        """The milestones in the pool now, as (stage name, step, files ref)."""
        return [self.shipped[m.name] for m in self.members if m.name in self.shipped]

    def ratings(self) -> dict[str, float]:
        return {LEARNER: self.learner_elo, **{m.name: self.league.player(m.name).rating for m in self.members}}

    def rate(self, games: list[dict[str, Any]]) -> None:
        """Rate games an actor played (its own ratings in them are replaced by the learner's)."""
        for game in games:
            score = float(game["score_a"])
            rating_a, rating_b = self.league.record(LEARNER, str(game["player_b"]), score)
            self.recent = [*self.recent[-199:], score]
            self._pending_games.append({**game, "rating_a": rating_a, "rating_b": rating_b})


class RemoteArenas:
    """What the run loop asks of "the env" when the arenas live in Ray actors: the shapes (of one
    actor's arenas), the reward phase and mechanics lane (relayed to every actor), the arena RNG state
    (actor 0's), restarts. Stepping happens in the actors only."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.num_arenas: int = info["num_arenas"]
        self.num_cars: int = info["num_cars"]
        self.num_agents: int = info["num_agents"]
        self.obs_dim: int = info["obs_dim"]
        self.num_actions: int = info["num_actions"]
        self.actions = LookupTableAction(info["table"])
        self.worker_restarts = 0  # actor restarts (the learner's rollouts are never cut by them)
        self.reward_weights: dict[str, float] | None = None
        self.mechanics_active: bool | None = None
        self.rng_state: dict[str, Any] = info["rng_state"]
        self.pending_rng_state: dict[str, Any] | None = None

    total_touches = 0
    total_agent_seconds = 0.0
    total_goals = 0

    def reset(self) -> Array:
        raise RuntimeError("with run.collector=ray the arenas live in the Ray actors; they are reset there")

    def step(self, actions: Array) -> StepResult:
        raise RuntimeError("with run.collector=ray the arenas live in the Ray actors; they are stepped there")

    def reward_means(self) -> dict[str, float]:
        return {}

    def set_reward_weights(self, weights: dict[str, float]) -> None:
        self.reward_weights = dict(weights)

    def set_mechanics_active(self, active: bool) -> None:
        self.mechanics_active = active

    def get_rng_state(self) -> dict[str, Any]:
        return self.rng_state

    def set_rng_state(self, state: dict[str, Any]) -> None:
        self.rng_state = self.pending_rng_state = state

    def describe(self) -> dict[str, Any]:
        return {"backend": "ray", "num_arenas": self.num_arenas, "num_agents": self.num_agents}

    def close(self) -> None:
        return None


def nbytes(value: Any) -> int:
    """Bytes of the arrays and tensors in ``value`` (what crosses the network, without pickling overhead)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, torch.Tensor):
        return int(value.element_size() * value.nelement())
    if isinstance(value, dict):
        return sum(nbytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(nbytes(v) for v in value)
    if isinstance(value, Rollout):
        return sum(nbytes(getattr(value, f.name)) for f in fields(value) if f.name != "stats")
    if isinstance(value, PolicyWeights):
        return nbytes(value.model) + nbytes(value.obs_rms or {})
    return 0


class RayCollector:
    """``run.collector: ray``: rollouts from ``run.ray_actors`` Ray actors, with the interface of
    :class:`ArenaCollector` (``collect(weights, global_step) -> Rollout``, ``env``, ``matchmaker``).

    ``run.ray_address`` ``''`` starts a private local cluster for this run (the dashboard off unless
    ``run.ray_dashboard``); ``auto`` or ``host:port`` joins a running one. A process that already called
    ``ray.init`` (tests, notebooks) is used as it is and left running at :meth:`close`.
    """

    def __init__(self, cfg: Config, stage: int, run_dir: Path | None) -> None:
        ray = self.ray = import_ray()
        self.cfg, self.stage = cfg, stage
        self.env_cfg = stage_config(cfg, stage)
        run = cfg.run
        self.notes: list[str] = []
        self.actors: list[Any] = []
        self.owns_ray = not ray.is_initialized()
        if self.owns_ray:
            # '' is a private local cluster ("local": even when `ray start` runs here); the dashboard only on request
            local = not run.ray_address
            # Ray starts its workers at niceness 15; on a machine of their own the actors are the workload
            system = {"worker_niceness": 0} if local else None
            ray.init(
                address="local" if local else run.ray_address, include_dashboard=run.ray_dashboard if local else None,
                configure_logging=False, log_to_driver=True, _system_config=system,
            )  # fmt: skip
        self._check_resources(run.ray_actors, run.ray_cpus_per_actor)
        remote = ray.remote(
            num_cpus=run.ray_cpus_per_actor, max_restarts=run.max_worker_restarts, max_task_retries=-1,
            scheduling_strategy="SPREAD",
        )(CollectorActor)  # fmt: skip
        expected = node_versions()
        self.actors = [remote.remote(cfg, stage, i, expected) for i in range(run.ray_actors)]
        try:
            infos = self._hello()
        except BaseException:
            self._stop()
            raise
        first = infos[0]
        self.env = RemoteArenas(first)
        self.car_teams: Array = first["car_teams"]
        self.notes += first["notes"]
        self.pids = [int(i["pid"]) for i in infos]
        self.nodes = [str(i["node_id"]) for i in infos]
        self.notes.append(
            f"run.collector=ray: {len(infos)} actors x {self.env.num_arenas} arenas on {len(set(self.nodes))} "
            f"node(s) ({', '.join(sorted({str(i['node_ip']) for i in infos}))}), max policy lag "
            f"{run.max_policy_lag}"
        )
        if run.ray_actors > 1 and 1 <= run.max_policy_lag < run.ray_actors:
            self.notes.append(
                f"run.max_policy_lag={run.max_policy_lag} with {run.ray_actors} actors: rollouts arrive about one "
                "version behind per other actor, so many will be dropped as stale; run.max_policy_lag="
                f"{run.ray_actors} keeps them (docs/distributed.md)"
            )
        self.matchmaker = LearnerMatchmaker(
            cfg.selfplay, stage_opponent_share(cfg, stage), self.env.num_arenas, self.car_teams,
            self.env.actions.table, self.env.obs_dim, run_dir, cfg.run.seed + 17 * stage, put=ray.put,
        )  # fmt: skip
        if run_dir is not None:
            self.matchmaker.load_milestones(run_dir / "milestones")
        self.obs: Array = np.zeros((0, self.env.obs_dim), np.float32)  # the arenas' observations stay in the actors
        self.step_hook: Any = None  # no live view: the arena state stays in the actors
        self.inflight: dict[Any, int] = {}  # task ref -> actor index
        self.busy: set[int] = set()
        self.dead: set[int] = set()
        self.weights_ref: Any = None
        self.weights_version = -1
        self.seed_actor0 = True  # the first task of actor 0 continues the learner's torch RNG stream
        self.actor_restarts = 0
        self.dropped_stale_rollouts = 0
        self.discarded_by_actor = [0] * len(self.actors)
        self.rollouts_by_node: dict[str, int] = {}
        self.last: dict[str, float | None] = {}

    # ------------------------------------------------------------------ start
    def _check_resources(self, actors: int, cpus_per_actor: float) -> None:
        total = float(self.ray.cluster_resources().get("CPU", 0.0))
        if actors * cpus_per_actor > total + 1e-9:
            self._stop()
            raise ConfigError(
                f"run.ray_actors={actors} x run.ray_cpus_per_actor={cpus_per_actor:g} needs "
                f"{actors * cpus_per_actor:g} CPUs, the Ray cluster has {total:g}: lower run.ray_actors or "
                "run.ray_cpus_per_actor, or add nodes (ray start --address=<head>:6379)"
            )

    def _hello(self) -> list[dict[str, Any]]:
        ray = self.ray
        refs = [actor.hello.remote() for actor in self.actors]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=ACTOR_START_TIMEOUT_SECONDS)
        if len(ready) < len(refs):
            raise RunStoppedError(
                f"only {len(ready)} of {len(refs)} Ray actors started within {ACTOR_START_TIMEOUT_SECONDS:.0f} s; "
                "see `ray status` and the logs under /tmp/ray/session_latest/logs on the nodes"
            )
        try:
            infos: list[dict[str, Any]] = ray.get(refs)
        except ray.exceptions.RayError as err:
            raise RunStoppedError(f"a Ray actor could not start: {_cause(err)}") from None
        for info in infos:
            if info["refusal"] is not None:
                raise ConfigError(info["refusal"])
        return infos

    # ------------------------------------------------------------------ collect
    @property
    def learner_rows(self) -> Array:
        return self.matchmaker.learner_cols

    @property
    def total_discarded_rollouts(self) -> int:
        return sum(self.discarded_by_actor)

    def rng_state(self) -> dict[str, Any]:
        return self.env.get_rng_state()

    def _settings(self, index: int, global_step: int) -> TaskSettings:
        settings = TaskSettings(
            global_step, self.env.reward_weights, self.env.mechanics_active, self.matchmaker.ratings(),
            self.matchmaker.snapshots(),
        )  # fmt: skip
        if index == 0 and self.seed_actor0:
            settings.torch_rng_state = torch.get_rng_state()
            self.seed_actor0 = False
        if index == 0 and self.env.pending_rng_state is not None:
            settings.env_rng_state, self.env.pending_rng_state = self.env.pending_rng_state, None
        return settings

    def _submit(self, index: int, global_step: int) -> None:
        ref = self.actors[index].collect.remote(self.weights_ref, self._settings(index, global_step))
        self.inflight[ref] = index
        self.busy.add(index)

    def collect(self, weights: PolicyWeights, global_step: int = 0, train_seconds: float = 0.0) -> Rollout:
        """The next rollout at most ``run.max_policy_lag`` versions behind ``weights`` (see the module docs).
        ``train_seconds`` is the in-process collector's (the kickstart's clock); Ray actors never kickstart."""
        ray, run = self.ray, self.cfg.run
        start = time.perf_counter()
        put_seconds = None
        if weights.version != self.weights_version:
            self.weights_ref = ray.put(weights)  # once per update; every actor task shares the reference
            self.weights_version = weights.version
            put_seconds = time.perf_counter() - start
            self.last["perf/weights_bytes"] = float(nbytes(weights))
        for index in range(len(self.actors)):
            if index not in self.busy and index not in self.dead:
                self._submit(index, global_step)
        if run.max_policy_lag == 0:
            return self._collect_all(weights, global_step, start, put_seconds)
        while True:
            index, received, get_seconds = self._next_rollout()
            if received is None:
                continue
            rollout = received
            lag = weights.version - rollout.policy_version
            if lag > run.max_policy_lag:
                self.dropped_stale_rollouts += 1
                self._submit(index, global_step)
                continue
            if run.max_policy_lag >= 1:
                self._submit(index, global_step)  # collects with these weights while the learner updates
            break
        wait_seconds = time.perf_counter() - start
        self.last.update(
            {
                "perf/policy_lag": float(lag),
                "perf/weights_put_seconds": put_seconds,
                "perf/rollout_bytes": float(nbytes(rollout)),
                "perf/rollout_get_seconds": get_seconds,
                "perf/rollout_wait_seconds": wait_seconds,
                "perf/actor_collect_seconds": rollout.stats.collect_seconds,
                "ray/actor": float(index),
            }
        )
        rollout.stats.collect_seconds = wait_seconds  # the learner's view: what the iteration waited
        return rollout

    def _all_gone(self) -> RunStoppedError:
        run = self.cfg.run
        return RunStoppedError(
            f"every Ray actor is gone ({len(self.dead)} died more than run.max_worker_restarts="
            f"{run.max_worker_restarts} times); see `ray status` and /tmp/ray/session_latest/logs on the nodes"
        )

    def _next_rollout(self) -> tuple[int, Rollout | None, float]:
        """Wait for the first of the tasks in flight: ``(actor index, its rollout, seconds of ray.get)``,
        the rollout accounted (:meth:`_account`); ``None`` when that actor is gone for good (it is marked
        dead). Raises :class:`RunStoppedError` when no actor is left or none delivers in time."""
        ray, run = self.ray, self.cfg.run
        if not self.inflight:
            raise self._all_gone()
        ready, _ = ray.wait(list(self.inflight), num_returns=1, timeout=run.worker_timeout_seconds)
        if not ready:
            raise RunStoppedError(
                f"no rollout from any of {len(self.inflight)} Ray actors in {run.worker_timeout_seconds:g} s "
                "(run.worker_timeout_seconds); see `ray status` (a node may be gone with no CPUs left to "
                "restart its actor) and /tmp/ray/session_latest/logs"
            )
        ref = ready[0]
        index = self.inflight.pop(ref)
        self.busy.discard(index)
        get_start = time.perf_counter()
        rollout: Rollout
        info: dict[str, Any]
        try:
            rollout, info = ray.get(ref)
        except ray.exceptions.RayActorError as err:  # restarts used up (Ray retries the task until then)
            self.dead.add(index)
            self.notes.append(f"Ray actor {index} is gone: {_cause(err)}")
            return index, None, 0.0
        except ray.exceptions.RayError as err:
            raise RunStoppedError(f"Ray actor {index} failed: {_cause(err)}") from None
        get_seconds = time.perf_counter() - get_start
        _make_writable(rollout)
        self._account(index, info)
        return index, rollout, get_seconds

    def _collect_all(
        self, weights: PolicyWeights, global_step: int, start: float, put_seconds: float | None
    ) -> Rollout:
        """``max_policy_lag: 0``: every live actor collects with ``weights`` and the learner trains on all
        their rollouts as one batch (synchronous data-parallel collection: no lag, and the collection
        scales with the actors; the update does not overlap it). A rollout of older weights (left over
        from a timeout or a restart) is dropped and its actor collects again."""
        gathered: dict[int, Rollout] = {}
        get_seconds = 0.0
        while self.inflight:
            index, rollout, seconds = self._next_rollout()
            if rollout is None:
                continue
            get_seconds += seconds
            if rollout.policy_version != weights.version:
                self.dropped_stale_rollouts += 1
                self._submit(index, global_step)
                continue
            gathered[index] = rollout
        if not gathered:
            raise self._all_gone()
        parts = [gathered[i] for i in sorted(gathered)]  # actor order: the same rows every iteration
        merged = merge_rollouts(parts)
        wait_seconds = time.perf_counter() - start
        self.last.update(
            {
                "perf/policy_lag": 0.0,
                "perf/weights_put_seconds": put_seconds,
                "perf/rollout_bytes": float(sum(nbytes(r) for r in parts)),
                "perf/rollout_get_seconds": get_seconds,
                "perf/rollout_wait_seconds": wait_seconds,
                "perf/actor_collect_seconds": max(r.stats.collect_seconds for r in parts),
                "ray/actors_in_batch": float(len(parts)),
            }
        )
        merged.stats.collect_seconds = wait_seconds
        return merged

    def _account(self, index: int, info: dict[str, Any]) -> None:
        """Restarts (a new process id), the node, the games to rate, the arenas' RNG state of actor 0."""
        if int(info["pid"]) != self.pids[index]:
            self.actor_restarts += 1
            self.env.worker_restarts = self.actor_restarts
            self.pids[index] = int(info["pid"])
            if index == 0:
                self.seed_actor0 = False  # a fresh actor 0 seeds itself from the run's seed
        node = str(info["node_id"])
        self.nodes[index] = node
        self.rollouts_by_node[node] = self.rollouts_by_node.get(node, 0) + 1
        self.discarded_by_actor[index] = int(info["discarded_rollouts"])
        self.matchmaker.rate(info["games"])
        if index == 0:
            self.env.rng_state = info["rng_state"]

    def metrics(self) -> dict[str, float | None]:
        """``health/actor_restarts``, ``health/dropped_stale_rollouts``, the transfer sizes and times."""
        return {
            **self.last,
            "health/actor_restarts": float(self.actor_restarts),
            "health/dropped_stale_rollouts": float(self.dropped_stale_rollouts),
            "health/dead_actors": float(len(self.dead)),
            "ray/nodes_contributing": float(len(self.rollouts_by_node)),
        }

    def close(self) -> None:
        """Stop the actors (and the local cluster this collector started); pending rollouts are dropped."""
        try:
            self.matchmaker.flush()
        finally:
            self._stop()

    def _stop(self) -> None:
        ray = self.ray
        closing = [actor.close.remote() for actor in self.actors]
        if closing:
            ray.wait(closing, num_returns=len(closing), timeout=10.0)
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors = []
        if self.owns_ray and ray.is_initialized():
            ray.shutdown()


def _make_writable(rollout: Rollout) -> None:
    """Ray hands arrays over as read-only views of the object store; torch wants to own writable memory."""
    for f in fields(rollout):
        value = getattr(rollout, f.name)
        if isinstance(value, np.ndarray) and not value.flags.writeable:
            setattr(rollout, f.name, value.copy())


def _cause(err: BaseException) -> str:
    """The first line of a Ray error's message (its traceback stays in the node's logs)."""
    text = str(err).strip()
    return text.splitlines()[0][:500] if text else type(err).__name__
