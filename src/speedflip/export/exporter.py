"""``speedflip export RUN --rlbot DIR [--onnx FILE] [--torchscript FILE] [--force]``.

The RLBot folder holds ``bot.toml`` (RLBot v5), ``bot.py`` (the agent), ``speedflip_runtime/``
(the bot's code: the run's observation builder, field layout and normalizer copied verbatim from
this speedflip, plus the numpy policy, the compat->arrays conversion and the agent), the policy
weights and observation normalizer as ``policy.safetensors``, and ``speedflip_bot.json`` (the
observation settings, the lookup table, tick skip and action delay). Before the folder is put in
place, a short RocketSim match is replayed through the bundled code and must give the observations
and actions training gives (see :mod:`speedflip.export.parity`).
"""

from __future__ import annotations

import ast
import inspect
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from speedflip import __version__
from speedflip._types import Array
from speedflip.export.errors import ExportError

BUNDLE = "speedflip_runtime"

# speedflip modules copied into the bundle verbatim (imports rewritten): module -> bundle module
COPIED = {
    "speedflip._types": "_types",
    "speedflip.env.layout": "layout",
    "speedflip.env.obs": "obs",
    "speedflip.algos.normalize": "normalize",
    "speedflip.export.runtime.state": "state",
    "speedflip.export.runtime.policy": "policy",
    "speedflip.export.runtime.convert": "convert",
    "speedflip.export.runtime.agent": "agent",
}
# speedflip modules replaced by a small stand-in: module -> (bundle module, names it provides)
STANDINS = {
    "speedflip.env.arenas": ("state", {"GameArrays"}),
    "speedflip.env.actions": ("controls", {"NUM_CONTROLS", "CONTROL_NAMES"}),
}
# what the bundle may import besides itself (torch only lazily, for the optional torch backend)
ALLOWED = {"__future__", "numpy", "typing", "dataclasses", "json", "struct", "pathlib", "collections", "math", "torch"}
REQUIREMENTS = ("numpy>=1.24", "rlbot==2.0.0b52", "rlgym-compat==2.3.6")


# ---------------------------------------------------------------------- bundling
def _target(module: str) -> tuple[str, set[str] | None] | None:
    if module in COPIED:
        return COPIED[module], None
    if module in STANDINS:
        return STANDINS[module]
    return None


def rewrite_imports(source: str, filename: str, absolute: bool = False) -> str:
    """Point a copied module's ``speedflip`` imports at the bundle; refuse imports the bundle cannot serve.

    ``absolute``: ``from speedflip_runtime.x import`` (for ``bot.py``, a script), else ``from .x import``.
    """
    tree = ast.parse(source, filename)
    lines = source.splitlines(keepends=True)
    top = set(map(id, tree.body))
    prefix, package = (f"{BUNDLE}.", BUNDLE) if absolute else (".", ".")
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root == "speedflip" or root not in ALLOWED | {"rlbot", "rlgym_compat", "sys"}:
                    raise ExportError(f"{filename} imports {alias.name}, which an exported bot cannot carry")
            continue
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        module = node.module
        if module.split(".")[0] != "speedflip":
            if module.split(".")[0] not in ALLOWED | {"rlbot", "rlgym_compat"}:
                raise ExportError(f"{filename} imports from {module}, which an exported bot cannot carry")
            continue
        if id(node) not in top:
            raise ExportError(f"{filename}: speedflip imports must be at module level to be bundled ({module})")
        names = [(a.name, a.asname) for a in node.names]
        target = _target(module)
        if target is not None:
            bundle_module, provided = target
            missing = sorted({n for n, _ in names} - provided) if provided is not None else []
            if missing:
                raise ExportError(
                    f"{filename} imports {', '.join(missing)} from {module}; the bot bundle's stand-in for that "
                    "module does not provide it (extend STANDINS in speedflip/export/exporter.py)"
                )
            text = ", ".join(n if a is None else f"{n} as {a}" for n, a in names)
            new = f"from {prefix}{bundle_module} import {text}\n"
        else:
            parts = []
            for n, a in names:
                sub = _target(f"{module}.{n}")
                if sub is None or sub[1] is not None:
                    raise ExportError(
                        f"{filename} imports {module}.{n}, which the bot bundle does not carry "
                        "(the observation code must only use numpy, the field layout and the normalizer)"
                    )
                parts.append(f"from {package} import {sub[0]} as {a or n}\n")
            new = "".join(parts)
        assert node.end_lineno is not None
        edits.append((node.lineno - 1, node.end_lineno, new))
    for start, end, new in sorted(edits, reverse=True):
        lines[start:end] = [new]
    return "".join(lines)


def _module_source(name: str) -> str:
    import importlib

    module = importlib.import_module(name)
    return inspect.getsource(module)


def write_runtime(folder: Path) -> None:
    """``folder/speedflip_runtime/``: the copied and rewritten modules plus the stand-ins."""
    from speedflip.env.actions import CONTROL_NAMES

    pkg = folder / BUNDLE
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        f'"""speedflip {__version__} bot runtime: the observation, normalizer and policy the run trained with."""\n'
    )
    for module, target in COPIED.items():
        source = rewrite_imports(_module_source(module), module.replace(".", "/") + ".py")
        (pkg / f"{target}.py").write_text(f"# copied from {module} (speedflip {__version__})\n" + source)
    (pkg / "controls.py").write_text(
        '"""Control order of the lookup table (the bundle\'s stand-in for speedflip.env.actions)."""\n\n'
        f"CONTROL_NAMES = {tuple(CONTROL_NAMES)!r}\nNUM_CONTROLS = len(CONTROL_NAMES)\n"
    )


# ---------------------------------------------------------------------- reading the run
@dataclass
class Source:
    """What a checkpoint holds that an export needs."""

    checkpoint: Path
    meta: dict[str, Any]
    config: dict[str, Any]
    policy: dict[str, Array]
    obs_rms: dict[str, Array]
    obs_options: dict[str, object]
    team_size: int
    blue_size: int
    orange_size: int
    obs_dim: int
    num_actions: int
    # an ensemble (``RUN@lastN``): every member's policy layers and observation normalizer, oldest first, the
    # newest being ``checkpoint``/``policy``/``obs_rms``; empty for one network
    members: tuple[tuple[Path, dict[str, Array], dict[str, Array]], ...] = ()

    @property
    def checkpoints(self) -> list[Path]:
        """The checkpoints whose networks play: the ensemble's members, or the one checkpoint."""
        return [m[0] for m in self.members] or [self.checkpoint]


def run_name(checkpoint: Path) -> str:
    """The run folder's name for ``RUN/checkpoints/STEP`` and ``RUN/milestones/STAGE/STEP`` (the shipped bot),
    else ``speedflip``."""
    if checkpoint.parent.name == "checkpoints":
        return checkpoint.parent.parent.name
    if checkpoint.parent.parent.name == "milestones":
        return checkpoint.parent.parent.parent.name
    return "speedflip"


def read_source(run: str) -> Source:
    """Find and check the checkpoint; a clear :class:`ExportError` when it cannot be exported."""
    from speedflip.checkpoint import verify_checkpoint
    from speedflip.selfplay.evaluate import training_obs_options
    from speedflip.selfplay.policies import ensemble_spec, find_checkpoint, last_milestones
    from speedflip.watch.run import curriculum_padding

    checkpoint = find_checkpoint(run)  # for RUN@lastN the newest member, whose config stands for all
    meta = verify_checkpoint(checkpoint)
    config = meta.get("config")
    compat = meta.get("compat")
    if not isinstance(config, dict) or not isinstance(compat, dict) or "obs_dim" not in compat:
        raise ExportError(
            f"{checkpoint}: meta.json has no config/compat section; it is not a speedflip Rocket League checkpoint"
        )
    gym = config.get("gym") or {}
    if config.get("algo") == "ppo_recurrent" and not (isinstance(gym, dict) and gym.get("env_id")):
        raise ExportError(
            f"{checkpoint} is a recurrent (LSTM/GRU) policy; the RLBot/ONNX/TorchScript exports carry feed-forward "
            "policies only for now. It can still play matches: speedflip eval / speedflip watch"
        )
    if config.get("algo", "ppo") != "ppo" or (isinstance(gym, dict) and gym.get("env_id")):
        raise ExportError(
            f"{checkpoint} is from a Gymnasium or non-PPO run; only Rocket League PPO policies export to RLBot"
        )
    head = (config.get("ppo") or {}).get("head", "categorical")
    if head != "categorical":
        raise ExportError(
            f"{checkpoint} uses the '{head}' policy head; RLBot export supports the lookup-table head only"
        )
    env = config.get("env") or {}
    options = dict(training_obs_options(str(checkpoint)))
    pad, team = curriculum_padding(str(checkpoint))
    blue, orange = int(env.get("blue_size", 1)), int(env.get("orange_size", 1))
    options["obs_team_size"] = max(int(str(options.get("obs_team_size", 0))), pad, blue, orange)
    policy, obs_rms = _read_networks(checkpoint)
    members: tuple[tuple[Path, dict[str, Array], dict[str, Array]], ...] = ()
    ensemble = ensemble_spec(run)
    if ensemble is not None:
        paths = last_milestones(*ensemble, run)
        for path in paths[:-1]:
            if verify_checkpoint(path).get("compat") != compat:
                raise ExportError(f"{path} has another network or observation size than {checkpoint}: not one run")
        older = tuple((path, *_read_networks(path)) for path in paths[:-1])
        members = (*older, (checkpoint, policy, obs_rms))  # the newest member is ``checkpoint``, read above
    return Source(
        checkpoint=checkpoint, meta=meta, config=config, policy=policy, obs_rms=obs_rms, obs_options=options,
        team_size=team or blue, blue_size=blue, orange_size=orange, obs_dim=int(compat["obs_dim"]),
        num_actions=int(compat.get("num_actions", 0)), members=members,
    )  # fmt: skip


def _read_networks(checkpoint: Path) -> tuple[dict[str, Array], dict[str, Array]]:
    """A checkpoint's policy layers and observation normalizer (as numpy), checked."""
    from safetensors.numpy import load_file

    model = load_file(str(checkpoint / "model.safetensors"))
    state = load_file(str(checkpoint / "state.safetensors"))
    policy = {k: v for k, v in model.items() if k.startswith("policy.")}
    extra = sorted(k for k in model if not k.startswith(("policy.", "critic.")))
    if extra:
        raise ExportError(
            f"{checkpoint}: unexpected network parts {extra[:4]}; this exporter knows policy + critic MLPs"
        )
    obs_rms = {k.removeprefix("obs_rms."): v for k, v in state.items() if k.startswith("obs_rms.")}
    if set(obs_rms) != {"mean", "var", "count"}:
        raise ExportError(f"{checkpoint}: the observation normalizer (obs_rms) is missing from state.safetensors")
    return policy, obs_rms


def check_layout(src: Source) -> tuple[int, Array, list[list[float]], list[bool]]:
    """Build the run's observation with this speedflip and compare sizes: ``(obs_dim, table, pads, big)``.

    The table is the one the checkpoint was trained with (its stored ``env.action_table``, built by
    :func:`speedflip.env.action_forms.table_from_run_config`, the default table when unset).
    """
    from speedflip.env.action_forms import same_table, table_from_run_config
    from speedflip.env.actions import ActionError
    from speedflip.env.vec_env import RocketLeagueVecEnv
    from speedflip.selfplay.match import match_env_config

    try:
        trained_table = table_from_run_config(src.config)
    except ActionError as err:
        raise ExportError(f"{src.checkpoint}: the action table of its stored config cannot be built: {err}") from None
    env_cfg = (src.config.get("env") or {}) if isinstance(src.config, dict) else {}
    cfg = match_env_config(
        1, src.team_size, 10.0, obs_options=src.obs_options, action_table=env_cfg.get("action_table")
    )
    env = RocketLeagueVecEnv(cfg, seed=0)
    try:
        obs_dim, table = env.obs_dim, env.actions.table.copy()
        pads = env.arenas.arenas[0].get_boost_pads()
        positions = [[float(p.get_pos().x), float(p.get_pos().y), float(p.get_pos().z)] for p in pads]
        big = [bool(p.is_big) for p in pads]
    finally:
        env.close()
    if not same_table(table, trained_table):  # pragma: no cover - both come from the same setting
        raise ExportError(f"{src.checkpoint}: the export env's action table is not the one the run trained with")
    first = np.asarray(src.policy.get("policy.0.weight", np.zeros((0, 0))))
    if obs_dim != src.obs_dim or first.shape[-1] != obs_dim or len(table) != src.num_actions:
        raise ExportError(
            f"{src.checkpoint} was trained with observations of {src.obs_dim} floats and {src.num_actions} actions, "
            f"but its settings ({src.obs_options.get('obs_builder', 'default')} observation, "
            f"{src.team_size}v{src.team_size}) give {obs_dim} floats and {len(table)} actions with this speedflip: "
            "the observation layout changed since it was trained. Export it with the speedflip version that "
            "trained it, or retrain."
        )
    return obs_dim, table, positions, big


def bot_settings(src: Source, name: str, obs_dim: int, table: Array, positions: Any, big: Any) -> dict[str, Any]:
    """The contents of ``speedflip_bot.json``."""
    from speedflip.export.runtime.agent import FORMAT

    env = src.config.get("env") or {}
    opts = src.obs_options
    return {
        "format": FORMAT,
        "name": name,
        "speedflip_version": __version__,
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "source_checkpoint": str(src.checkpoint.resolve()),
        "global_step": int(src.meta.get("global_step", 0) or 0),
        "checkpoint_sha256": src.meta.get("sha256", {}),
        "ensemble_members": len(src.members) or 1,
        "member_checkpoints": [str(p.resolve()) for p in src.checkpoints],
        "obs": {
            "builder": str(opts.get("obs_builder", "default")),
            "team_size": int(str(opts.get("obs_team_size", 0))),
            "trained_blue_size": src.blue_size,
            "trained_orange_size": src.orange_size,
            "nearest_pads": int(str(opts.get("nearest_pads", 4))),
            "shuffle_slots": bool(opts.get("shuffle_slots", False)),
            "frame_stack": int(str(opts.get("frame_stack", 1))),
            "obs_dim": obs_dim,
        },
        "normalize_obs": bool((src.config.get("ppo") or {}).get("normalize_obs", True)),
        "tick_skip": int(env.get("tick_skip", 8)),
        "action_delay_ticks": int(env.get("action_delay_ticks", 1)),
        "tick_rate": 120,
        "policy_layers": (src.config.get("ppo") or {}).get("policy_layers"),
        "action_table": np.asarray(table, np.float64).round(6).tolist(),
        "pads": {"positions": positions, "big": big},
    }


def _bot_toml(name: str, agent_id: str, settings: dict[str, Any]) -> str:
    sizes = f"{settings['obs']['trained_blue_size']}v{settings['obs']['trained_orange_size']}"
    step = f"{settings['global_step']:,}"
    return f"""[settings]
agent_id = "{agent_id}"
name = "{name}"
run_command = ".\\\\venv\\\\Scripts\\\\python bot.py"
run_command_linux = "./venv/bin/python bot.py"

[details]
description = "A speedflip PPO bot trained in RocketSim ({sizes}, step {step}, tick skip {settings["tick_skip"]})."
fun_fact = "Its observations and actions were checked against training, step for step, when it was exported."
developer = "speedflip"
language = "python"
tags = ["{sizes}"]
"""


def _readme(name: str, settings: dict[str, Any], parity: str) -> str:
    return f"""# {name}: an RLBot v5 bot exported by speedflip {__version__}

Set up once (Python 3.11+):

    python -m venv venv
    venv/bin/pip install -r requirements.txt        (Windows: venv\\Scripts\\pip ...)

then add `bot.toml` to an RLBot v5 match. `pip install torch` makes the bot use torch for the
policy (exactly training's arithmetic); without it a numpy forward pass is used.

- observation: `{settings["obs"]["builder"]}` builder, {settings["obs"]["obs_dim"]} floats, teams padded to
  {settings["obs"]["team_size"]}, frame stack {settings["obs"]["frame_stack"]}
- actions: {len(settings["action_table"])}-row lookup table, a decision every {settings["tick_skip"]} ticks,
  trained with an action delay of {settings["action_delay_ticks"]} tick(s) (RLBot applies input one tick late)
- source: {settings["source_checkpoint"]} (step {settings["global_step"]:,})
- parity check at export: {parity}
"""


def bot_tensors(src: Source) -> dict[str, Array]:
    """``policy.safetensors``: ``policy.<i>.*`` and ``obs_rms.*`` for one network; for an ensemble the same per
    member under ``members.<j>.`` (oldest first)."""
    networks = [(m[1], m[2]) for m in src.members] or [(src.policy, src.obs_rms)]
    tensors: dict[str, Array] = {}
    for j, (policy, obs_rms) in enumerate(networks):
        prefix = f"members.{j}." if src.members else ""
        tensors.update({prefix + k: v.astype(np.float32) for k, v in policy.items()})
        tensors.update({f"{prefix}obs_rms.{k}": np.asarray(v, np.float64).reshape(-1) for k, v in obs_rms.items()})
    return tensors


def export_rlbot(src: Source, out_dir: Path, force: bool, name: str | None, check_steps: int = 120) -> tuple[Path, str]:
    """Write the bot folder (atomically: built beside it, checked, then renamed); returns ``(folder, parity)``."""
    from speedflip.export.parity import record_match, replay_through_bot
    from speedflip.export.runtime.policy import write_safetensors

    out_dir = Path(out_dir)
    if out_dir.exists() and not force:
        raise ExportError(f"'{out_dir}' already exists; choose another folder or pass --force to replace it")
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"'{out_dir}' exists and is not a folder")
    bot_name = name or run_name(src.checkpoint)
    agent_id = "speedflip/" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in bot_name.lower())
    obs_dim, table, positions, big = check_layout(src)
    settings = bot_settings(src, bot_name, obs_dim, table, positions, big)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{time.time_ns()}")
    try:
        tmp.mkdir()
        write_runtime(tmp)
        # read, not imported: bot.py imports rlbot, which only the bot's own environment needs
        bot_text = (Path(__file__).resolve().parent / "runtime" / "bot.py").read_text()
        bot_source = rewrite_imports(bot_text, "bot.py", absolute=True)
        (tmp / "bot.py").write_text(bot_source.replace("__AGENT_ID__", agent_id.split("/", 1)[1]))
        write_safetensors(tmp / "policy.safetensors", bot_tensors(src), {"format": "speedflip-policy-v1"})
        (tmp / "speedflip_bot.json").write_text(json.dumps(settings, indent=1))
        (tmp / "requirements.txt").write_text(
            "\n".join(REQUIREMENTS) + "\n# optional: torch (exact training arithmetic)\n"
        )
        # the bot keeps teammate/opponent slots in order (a run trained with shuffle_slots learned any order)
        options = {**src.obs_options, "shuffle_slots": False}
        recording = record_match(src.checkpoints, options, src.team_size, steps=check_steps)
        result = replay_through_bot(tmp, recording)
        if result.obs_mismatches:
            raise ExportError(f"the exported bot does not reproduce training's observations: {result.summary()}")
        (tmp / "bot.toml").write_text(_bot_toml(bot_name, agent_id, settings))
        (tmp / "README.md").write_text(_readme(bot_name, settings, result.summary()))
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}.old-{time.time_ns()}")
            out_dir.rename(old)
            shutil.rmtree(old, ignore_errors=True)
        tmp.rename(out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir, result.summary()


# ---------------------------------------------------------------------- ONNX / TorchScript
def policy_module(src: Source) -> Any:
    """A torch module: raw observation -> normalized (as in training) -> policy logits. For an ensemble the
    log of the mean of its members' action probabilities (each member with its own normalizer)."""
    import torch

    from speedflip.models.mlp import mlp

    layers = (src.config.get("ppo") or {}).get("policy_layers") or []
    normalize = bool((src.config.get("ppo") or {}).get("normalize_obs", True))

    class NormalizedPolicy(torch.nn.Module):
        def __init__(self, policy: dict[str, Array], obs_rms: dict[str, Array]) -> None:
            super().__init__()
            self.net = mlp(src.obs_dim, list(layers), src.num_actions, out_gain=0.01)
            weights = {k.removeprefix("policy."): torch.from_numpy(np.array(v)) for k, v in policy.items()}
            self.net.load_state_dict(weights)
            std = np.sqrt(np.asarray(obs_rms["var"], np.float64) + 1e-8)
            self.mean = torch.nn.Parameter(torch.from_numpy(np.asarray(obs_rms["mean"], np.float32)), False)
            self.std = torch.nn.Parameter(torch.from_numpy(std.astype(np.float32)), False)
            self.normalize = normalize

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            x = torch.clamp((obs - self.mean) / self.std, -10.0, 10.0) if self.normalize else obs
            out: torch.Tensor = self.net(x)
            return out

    class EnsembleModule(torch.nn.Module):
        def __init__(self, members: list[NormalizedPolicy]) -> None:
            super().__init__()
            self.members = torch.nn.ModuleList(members)

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            probs = torch.stack([torch.softmax(m(obs), -1) for m in self.members]).mean(0)
            return torch.log(probs)

    if not src.members:
        return NormalizedPolicy(src.policy, src.obs_rms).eval()
    return EnsembleModule([NormalizedPolicy(m[1], m[2]) for m in src.members]).eval()


def _sidecar(path: Path, src: Source, table: Array) -> Path:
    side = path.with_name(path.name + ".json")
    side.write_text(json.dumps({
        "input": f"raw observation [batch, {src.obs_dim}] (float32); normalization is inside the model",
        "output": f"logits [batch, {src.num_actions}]; action = argmax, controls = action_table[action]"
        + (f" (log of the mean action probabilities of {len(src.members)} networks)" if src.members else ""),
        "control_order": ["throttle", "steer", "pitch", "yaw", "roll", "jump", "boost", "handbrake"],
        "action_table": np.asarray(table, np.float64).round(6).tolist(),
        "obs_options": src.obs_options,
        "source_checkpoint": str(src.checkpoint.resolve()),
        "member_checkpoints": [str(p.resolve()) for p in src.checkpoints],
    }, indent=1))  # fmt: skip
    return side


def _refuse_existing(path: Path, force: bool) -> None:
    if path.exists() and not force:
        raise ExportError(f"'{path}' already exists; choose another file name or pass --force to replace it")


def export_torchscript(src: Source, path: Path, force: bool, table: Array) -> Path:
    """A TorchScript file of :func:`policy_module` (load with ``torch.jit.load``)."""
    import torch

    _refuse_existing(path, force)
    import warnings

    module = policy_module(src)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # torch.jit is deprecated in favour of torch.export, still works
        warnings.simplefilter("ignore", DeprecationWarning)
        traced = torch.jit.trace(module, torch.zeros(1, src.obs_dim))
        traced.save(str(path))
    _sidecar(path, src, table)
    return path


def onnx_available() -> tuple[bool, str]:
    """torch's ONNX exporter needs the ``onnx`` package (extra ``export``)."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        return False, "the onnx package is not installed: pip install 'speedflip[export]' (or pip install onnx)"
    return True, ""


def export_onnx(src: Source, path: Path, force: bool, table: Array) -> Path:
    """An ONNX file of :func:`policy_module` (input ``obs`` [batch, obs_dim], output ``logits``)."""
    import warnings

    import torch

    ok, why = onnx_available()
    if not ok:
        raise ExportError(f"--onnx: {why}")
    _refuse_existing(path, force)
    module = policy_module(src)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            module, (torch.zeros(1, src.obs_dim),), str(path), dynamo=False, input_names=["obs"],
            output_names=["logits"], dynamic_axes={"obs": {0: "batch"}, "logits": {0: "batch"}},
        )  # fmt: skip
    _sidecar(path, src, table)
    return path


# ---------------------------------------------------------------------- command
def run_export(
    run: str,
    rlbot: str | None,
    onnx: str | None,
    torchscript: str | None,
    force: bool,
    name: str | None,
    console: Any,
) -> int:
    """The ``export`` command."""
    if not (rlbot or onnx or torchscript):
        raise ExportError("nothing to export: give --rlbot DIR, --onnx FILE and/or --torchscript FILE")
    for path in (onnx, torchscript):
        if path:
            _refuse_existing(Path(path), force)
    if rlbot and Path(rlbot).exists() and not force:
        raise ExportError(f"'{rlbot}' already exists; choose another folder or pass --force to replace it")
    src = read_source(run)
    _, table, _, _ = check_layout(src)
    console.print(f"exporting {src.checkpoint} (step {int(src.meta.get('global_step', 0) or 0):,})", soft_wrap=True)
    if rlbot:
        folder, parity = export_rlbot(src, Path(rlbot), force, name)
        console.print(
            f"RLBot v5 bot: {folder} (bot.toml, bot.py, policy.safetensors, speedflip_bot.json)", soft_wrap=True
        )
        console.print(f"parity with training: {parity}", soft_wrap=True)
        if int((src.config.get("env") or {}).get("action_delay_ticks", 1)) != 1:
            console.print(
                "note: this run trained without the one-tick action delay RLBot has; timing will differ slightly"
            )
    if torchscript:
        console.print(f"TorchScript: {export_torchscript(src, Path(torchscript), force, table)}", soft_wrap=True)
    if onnx:
        console.print(f"ONNX: {export_onnx(src, Path(onnx), force, table)}", soft_wrap=True)
    return 0


def bundle_module(folder: Path) -> ModuleType:
    """The runtime package of an exported bot folder, imported (for tests and tools)."""
    from speedflip.export.parity import load_bundle

    return load_bundle(folder)
