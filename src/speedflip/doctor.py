"""``speedflip doctor``: is this install healthy, and how fast is it?

It reports versions (python, torch, rocketsim, rlgym, numpy and the optional extras), CPU cores and
thread settings, CUDA and NVML when present, a short physics and inference speed check, and the
startup verification checks: collision meshes found, action table coverage, observation size and a
forward pass. Every failed check comes with the fix. Exit code 0 on a healthy install, 1 otherwise.

:func:`startup_checks` is the verification routine on its own, for a trainer to run at start
(:func:`raise_on_failure` turns failures into a :class:`StartupCheckError`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from speedflip.config import EnvConfig
    from speedflip.models.build import PolicyModel


class StartupCheckError(RuntimeError):
    """The install or the configuration failed a startup check; the message lists every fix."""


@dataclass
class Check:
    """One check: ``status`` is ``ok``, ``warn`` (works, but worth knowing) or ``fail`` (with a ``fix``)."""

    name: str
    status: str
    detail: str
    fix: str = ""

    @property
    def ok(self) -> bool:
        return self.status != "fail"


def _ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


def _fail(name: str, detail: str, fix: str) -> Check:
    return Check(name, "fail", detail, fix)


def _guarded(name: str, fix: str, fn: Callable[[], Check]) -> Check:
    """Run a check; an exception it raises is a failed check (doctor must report, never crash)."""
    try:
        return fn()
    except Exception as err:  # any failure of an import or a library call is what the report is about
        return _fail(name, f"{type(err).__name__}: {err}", fix)


# ---------------------------------------------------------------------- versions
PACKAGES = (
    # (import name, distribution, required, what it is for)
    ("numpy", "numpy", True, "arrays"),
    ("torch", "torch", True, "networks"),
    ("RocketSim", "rocketsim", True, "physics"),
    ("rlgym.rocket_league", "rlgym-rocket-league", True, "meshes and RLGym components"),
    ("safetensors", "safetensors", True, "checkpoints"),
    ("rlviser_py", "rlviser-py", False, "--render (extra: render)"),
    ("rlbot", "rlbot", False, "running exported bots (extra: export)"),
    ("rlgym_compat", "rlgym-compat", False, "running exported bots (extra: export)"),
    ("onnx", "onnx", False, "export --onnx (extra: export)"),
)


def _dist_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def version_checks() -> list[Check]:
    """Python and package versions; a required package that does not import is a failure."""
    checks = []
    py = sys.version_info
    if py >= (3, 10):
        checks.append(_ok("python", f"{platform.python_version()} ({sys.executable})"))
    else:
        checks.append(_fail("python", platform.python_version(), "use Python 3.10 or newer"))
    for module, dist, required, purpose in PACKAGES:
        version = _dist_version(dist)
        try:
            importlib.import_module(module)
        except ImportError as err:
            if required:
                checks.append(_fail(dist, f"cannot be imported ({err})", f"pip install --force-reinstall '{dist}'"))
            else:
                checks.append(Check(dist, "warn", f"not installed: needed only for {purpose}"))
            continue
        checks.append(_ok(dist, f"{version or '?'} ({purpose})"))
    numpy_version = _dist_version("numpy") or "0"
    if int(numpy_version.split(".")[0]) >= 2 and _dist_version("rlgym-rocket-league") == "2.0.1":
        checks.append(
            _fail("numpy<2", f"numpy {numpy_version} with rlgym-rocket-league 2.0.1", "pip install 'numpy>=1.24,<2'")
        )
    return checks


# ---------------------------------------------------------------------- machine
def machine_checks() -> list[Check]:
    """CPU cores, thread settings, CUDA devices and NVML readings."""
    import torch

    checks = []
    cores = os.cpu_count() or 1
    affinity_fn = getattr(os, "sched_getaffinity", None)
    usable = len(affinity_fn(0)) if affinity_fn is not None else cores
    checks.append(_ok("cpu", f"{usable} usable of {cores} logical cores, {platform.machine()} {platform.system()}"))
    env_threads = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if k in os.environ}
    threads = torch.get_num_threads()
    detail = f"torch intra-op {threads}, inter-op {torch.get_num_interop_threads()}"
    if env_threads:
        detail += ", " + ", ".join(f"{k}={v}" for k, v in env_threads.items())
    if threads > usable:
        fix = "set run.torch_threads (or OMP_NUM_THREADS) to at most the usable cores"
        checks.append(Check("threads", "warn", f"{detail} (more torch threads than the {usable} usable cores)", fix))
    else:
        checks.append(_ok("threads", detail))
    checks.append(_guarded("cuda", "reinstall torch for your CUDA driver, or use run.device=cpu", _cuda_check))
    checks.append(_nvml_check())
    return checks


def _cuda_check() -> Check:
    import torch

    if not torch.cuda.is_available():
        built = torch.version.cuda or torch.version.hip
        return _ok("cuda", "no GPU visible: training runs on the CPU" + ("" if built else " (CPU build of torch)"))
    names = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        names.append(f"{i}: {props.name}, {props.total_memory / 2**30:.1f} GiB")
    torch.zeros(1, device="cuda").add_(1)
    torch.cuda.synchronize()
    return _ok("cuda", f"torch {torch.version.cuda or torch.version.hip}; " + "; ".join(names))


def _nvml_check() -> Check:
    try:
        pynvml: Any = importlib.import_module("pynvml")
    except ImportError:
        return _ok("nvml", "pynvml not installed (GPU utilization and memory are not read)")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        return _ok("nvml", f"no NVIDIA driver ({err})")
    try:
        parts = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            util = pynvml.nvmlDeviceGetUtilizationRates(handle)
            mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
            parts.append(
                f"{i}: {name if isinstance(name, str) else name.decode()}, {util.gpu}% busy, "
                f"{mem.used / 2**30:.1f}/{mem.total / 2**30:.1f} GiB used"
            )
        return _ok("nvml", "; ".join(parts) or "no devices")
    except pynvml.NVMLError as err:
        return Check("nvml", "warn", f"NVML error: {err}")
    finally:
        pynvml.nvmlShutdown()


# ---------------------------------------------------------------------- startup verification
def meshes_check(meshes_dir: str | None = None) -> Check:
    """The soccar collision meshes are where RocketSim will look."""
    from speedflip.env.sim import default_meshes_dir

    folder = Path(meshes_dir) if meshes_dir else default_meshes_dir()
    found = sorted((folder / "soccar").glob("*.cmf")) if (folder / "soccar").is_dir() else []
    if not found:
        return _fail(
            "meshes",
            f"no soccar/*.cmf collision meshes in {folder}",
            "reinstall them with `pip install --force-reinstall rlgym-rocket-league`, or set env.meshes_dir to a "
            "folder holding soccar/mesh_*.cmf",
        )
    return _ok("meshes", f"{len(found)} soccar meshes in {folder}")


def startup_checks(env_cfg: EnvConfig | None = None, model: PolicyModel | None = None) -> list[Check]:
    """The startup verification: meshes, action table coverage, observation size, a forward pass.

    ``env_cfg`` defaults to the built-in env config; a one-arena env is built from it (a few
    milliseconds). ``model`` (optional) is the network a trainer is about to train; without it a
    fresh network with the default layers is used. Returns every check (nothing is raised).
    """
    from speedflip.config import EnvConfig

    cfg = (env_cfg or EnvConfig()).model_copy(update={"num_arenas": 1})
    checks = [meshes_check(cfg.meshes_dir)]
    if not checks[0].ok:
        return checks
    checks.append(_guarded("action table", "fix the lookup table (see speedflip.env.actions)", _actions_check))
    state: dict[str, Any] = {}
    checks.append(
        _guarded(
            "observation",
            "report this with the config: the observation does not match its size",
            lambda: _obs_check(cfg, state),
        )
    )
    if "obs" in state:
        checks.append(
            _guarded("forward pass", "check ppo.policy_layers / the checkpoint", lambda: _forward_check(state, model))
        )
    return checks


def _actions_check() -> Check:
    import numpy as np

    from speedflip.env.actions import ActionError, LookupTableAction

    try:
        actions = LookupTableAction()  # validates the table: shape, ranges, both directions of every axis
    except ActionError as err:
        return _fail("action table", str(err), f"fix the lookup table in speedflip.env.actions: {err}")
    coverage = actions.coverage
    if not coverage.has_neutral:
        return _fail("action table", coverage.summary(), "add an all-zero row (needed for idle and kickoff waits)")
    if coverage.num_flips == 0 or not np.any(actions.table[:, 6] == 1):
        return _fail("action table", coverage.summary(), "the table needs jump and boost rows")
    return _ok("action table", coverage.summary())


def _obs_check(cfg: EnvConfig, state: dict[str, Any]) -> Check:
    import numpy as np

    from speedflip.env.obs import observation_size
    from speedflip.env.vec_env import RocketLeagueVecEnv

    env = RocketLeagueVecEnv(cfg, seed=0)
    try:
        obs = env.reset()
        zeros = np.zeros(env.num_agents, np.int64)
        obs = env.step(zeros).obs
        expected = observation_size(
            cfg.obs_builder, cfg.blue_size, cfg.orange_size, cfg.obs_team_size, cfg.nearest_pads, cfg.frame_stack
        )
        state.update(obs=obs, num_actions=env.num_actions, obs_dim=env.obs_dim)
    finally:
        env.close()
    where = f"{cfg.obs_builder} obs, {cfg.blue_size}v{cfg.orange_size}, frame stack {cfg.frame_stack}"
    if obs.shape != (cfg.num_cars, expected) or env.obs_dim != expected:
        got = f"{where}: got {list(obs.shape)}, expected [{cfg.num_cars}, {expected}]"
        return _fail("observation", got, "the builder and observation_size() disagree: report this with your config")
    if not np.all(np.isfinite(obs)):
        return _fail("observation", f"{where}: holds NaN or infinite values", "report this with your config")
    return _ok("observation", f"{expected} floats per agent ({where})")


def _forward_check(state: dict[str, Any], model: PolicyModel | None) -> Check:
    import torch

    from speedflip.models.mlp import ActorCritic

    obs_dim, num_actions = int(state["obs_dim"]), int(state["num_actions"])
    net = model if model is not None else ActorCritic(obs_dim, num_actions, [256, 256], [256, 256])
    if net.obs_dim != obs_dim:
        return _fail(
            "forward pass",
            f"the network takes {net.obs_dim} inputs but the env gives {obs_dim}",
            "use a checkpoint/network built for this observation (team sizes, obs builder, frame stack)",
        )
    device = next(net.parameters()).device
    with torch.no_grad():
        x = torch.as_tensor(state["obs"], device=device)
        if isinstance(net, ActorCritic):
            params, value = net.policy(x), net.value(x)
        else:  # recurrent: one step from the episode-start state
            starts = torch.ones(x.shape[0], dtype=torch.bool, device=device)
            core, _ = net.forward_sequence(x.unsqueeze(0), net.initial_state(x.shape[0], device), starts.unsqueeze(0))
            params, value = net.policy(core[0]), net.critic(core[0]).squeeze(-1)
    if params.shape[0] != x.shape[0] or value.shape != (x.shape[0],):
        return _fail("forward pass", f"output shapes {list(params.shape)}, {list(value.shape)}", "check the network")
    if not (torch.isfinite(params).all() and torch.isfinite(value).all()):
        return _fail(
            "forward pass", "NaN or infinite outputs", "the weights are damaged: resume from another checkpoint"
        )
    return _ok("forward pass", f"{x.shape[0]} agents -> {list(params.shape)} policy outputs and values on {device}")


def raise_on_failure(checks: list[Check]) -> None:
    """Raise :class:`StartupCheckError` listing every failed check and its fix (nothing when all pass)."""
    failed = [c for c in checks if not c.ok]
    if failed:
        lines = "; ".join(f"{c.name}: {c.detail} -> fix: {c.fix}" for c in failed)
        raise StartupCheckError(f"startup checks failed: {lines}")


# ---------------------------------------------------------------------- speed
def physics_speed(seconds: float) -> Check:
    """Raw RocketSim ticks per second of one 1v1 arena on this thread, for ``seconds``."""
    import RocketSim as rsim

    from speedflip.env.sim import init_rocketsim

    init_rocketsim()
    arena = rsim.Arena(rsim.GameMode.SOCCAR, memory_weight_mode=rsim.MemoryWeightMode.LIGHT, tick_rate=120)
    for team in (rsim.Team.BLUE, rsim.Team.ORANGE):
        car = arena.add_car(team)
        car.set_controls(rsim.CarControls(throttle=1.0, boost=True))
    arena.reset_kickoff()
    ticks = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        arena.step(120)
        ticks += 120
    rate = ticks / (time.perf_counter() - start)
    return _ok("physics speed", f"{rate:,.0f} ticks/s (1v1, one thread) = {rate / 8:,.0f} env steps/s at tick skip 8")


def inference_speed(seconds: float, batch: int = 64) -> Check:
    """Batched policy forward passes per second (the default 256x256 network, ``batch`` agents)."""
    import torch

    from speedflip.models.mlp import ActorCritic

    net = ActorCritic(103, 90, [256, 256], [256, 256])
    x = torch.randn(batch, 103)
    calls = 0
    with torch.no_grad():
        for _ in range(5):  # warm-up (first calls allocate)
            net.act(x)
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            net.act(x)
            calls += 1
    rate = calls / (time.perf_counter() - start)
    return _ok("inference speed", f"{rate:,.0f} batched steps/s = {rate * batch:,.0f} agent actions/s (batch {batch})")


# ---------------------------------------------------------------------- report
@dataclass
class Report:
    sections: dict[str, list[Check]] = field(default_factory=dict)

    @property
    def failed(self) -> list[Check]:
        return [c for checks in self.sections.values() for c in checks if not c.ok]

    def as_dict(self) -> dict[str, Any]:
        return {
            "healthy": not self.failed,
            "sections": {name: [asdict(c) for c in checks] for name, checks in self.sections.items()},
        }


def collect_report(seconds: float = 1.0) -> Report:
    """Run every check; ``seconds`` per speed measurement."""
    report = Report()
    report.sections["versions"] = version_checks()
    report.sections["machine"] = machine_checks()
    report.sections["startup checks"] = startup_checks()
    fix = "see the startup checks above"
    if all(c.ok for c in report.sections["startup checks"]):
        report.sections["speed"] = [
            _guarded("physics speed", fix, lambda: physics_speed(seconds)),
            _guarded("inference speed", fix, lambda: inference_speed(seconds)),
        ]
    return report


def run_doctor(console: Console, seconds: float = 1.0, json_path: str | None = None) -> int:
    """The ``doctor`` command: print the report; 0 when healthy, 1 when a check failed."""
    from rich.markup import escape
    from rich.table import Table

    report = collect_report(seconds)
    marks = {"ok": "[green]ok[/green]", "warn": "[yellow]note[/yellow]", "fail": "[bold red]FAIL[/bold red]"}
    table = Table(title="speedflip doctor", title_justify="left", show_header=False)
    for section, checks in report.sections.items():
        table.add_section()
        for check in checks:
            table.add_row(f"[bold]{section}[/bold]" if check is checks[0] else "", check.name,
                          marks[check.status], escape(check.detail))  # fmt: skip
    console.print(table)
    if json_path:
        Path(json_path).write_text(json.dumps(report.as_dict(), indent=2))
        console.print(f"report written to {json_path}")
    if report.failed:
        console.print(f"[bold red]{len(report.failed)} check(s) failed.[/bold red] Fixes:")
        for check in report.failed:
            console.print(f"- {escape(check.name)}: {escape(check.fix)}", soft_wrap=True)
        return 1
    console.print("[green]healthy[/green]: everything speedflip needs is here and works.")
    return 0
