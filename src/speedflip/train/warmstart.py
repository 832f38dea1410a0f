"""``speedflip train --from SPEC``: start a new run from a chosen policy (a warm start).

Where a run starts, in the order of the seed documents:

1. an explicit checkpoint (``--from runs/a/checkpoints/2000000`` or any checkpoint folder),
2. a chosen milestone (``--from runs/a/milestones/main/2000000``, ``--from runs/a@2000000``, or
   ``--from runs/a@best``: its best-rated milestone, :mod:`speedflip.selfplay.best`),
3. the latest compatible checkpoint of the run directory (a plain resume; ``--from runs/a`` takes the
   newest verified checkpoint of another run).

A warm start loads the policy's weights and observation normalizer (and with ``keep_step`` the optimizer,
the step counter, the curriculum stage and the reward phase); everything else comes from the new run's
config, which may differ in anything that leaves the network's inputs and outputs the same (rewards,
opponents, PPO settings, presets). A network that does not fit is refused before anything is created,
with the difference and the setting that would fit. Every checkpoint of the new run records where it
started (``lineage`` in ``meta.json``, oldest ancestor last).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speedflip.checkpoint import CheckpointError, list_checkpoints, verify_checkpoint
from speedflip.config import Config, config_to_dict
from speedflip.selfplay.best import BEST_FILE, best_checkpoint


class StartFromError(CheckpointError):
    """``--from`` names nothing usable, or a policy that does not fit this run; the message says why and what would."""


@dataclass(frozen=True)
class StartPoint:
    """The checkpoint a run starts from, how it was found, and what is taken from it."""

    path: Path  # the checkpoint folder (verified)
    kind: str  # "checkpoint", "milestone" or "newest checkpoint of <run>"
    meta: dict[str, Any]  # its meta.json
    keep_step: bool  # also the optimizer, step counter, stage and reward phase

    @property
    def global_step(self) -> int:
        return int(self.meta.get("global_step", 0))

    def describe(self) -> str:
        """One line for the summary table."""
        taken = (
            "weights, obs normalizer, optimizer and step counter"
            if self.keep_step
            else "weights and obs normalizer; steps count from 0"
        )
        return f"{self.path} ({self.kind}, step {self.global_step:,}; {taken})"

    def lineage(self) -> list[dict[str, Any]]:
        """The new run's lineage: this start, then the ancestors the source recorded."""
        entry = {
            "from": str(self.path),
            "kind": self.kind,
            "global_step": self.global_step,
            "stage_name": self.meta.get("stage_name"),
            "config_hash": self.meta.get("config_hash"),
            "kept_step": self.keep_step,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        earlier = self.meta.get("lineage")
        return [entry, *(earlier if isinstance(earlier, list) else [])]


def _verified(path: Path, kind: str, keep_step: bool) -> StartPoint:
    try:
        meta = verify_checkpoint(path)
    except CheckpointError as err:
        raise StartFromError(f"--from {path}: {err}. Pick another checkpoint or milestone.") from None
    return StartPoint(path.resolve(), kind, meta, keep_step)


def _milestone_steps(run: Path) -> list[str]:
    folder = run / "milestones"
    if not folder.is_dir():
        return []
    stages = [stage for stage in sorted(folder.iterdir()) if stage.is_dir()]
    return [f"{stage.name}/{p.name}" for stage in stages for p in list_checkpoints(stage)]


def _by_step(run: Path, step: int, spec: str, keep_step: bool) -> StartPoint:
    """``RUN@STEP``: the milestone of that step (any stage), else the rolling checkpoint of that step."""
    milestones = sorted((run / "milestones").glob(f"*/{step}")) if (run / "milestones").is_dir() else []
    milestones = [p for p in milestones if (p / "meta.json").is_file()]
    if len(milestones) > 1:
        names = ", ".join(str(p) for p in milestones)
        raise StartFromError(f"--from {spec}: several milestones have step {step} ({names}); pass one folder instead.")
    if milestones:
        return _verified(milestones[0], "milestone", keep_step)
    checkpoint = run / "checkpoints" / str(step)
    if (checkpoint / "meta.json").is_file():
        return _verified(checkpoint, "checkpoint", keep_step)
    known = _milestone_steps(run)
    shown = ", ".join(known[-8:]) if known else "none"
    raise StartFromError(
        f"--from {spec}: '{run}' has no milestone or checkpoint at step {step}. Its milestones: {shown}. "
        f"Pass one of those steps, a checkpoint folder, or the run directory (its newest checkpoint)."
    )


def resolve_start(spec: str, keep_step: bool = False) -> StartPoint:
    """The checkpoint ``spec`` names: a checkpoint or milestone folder, ``RUN@STEP``, or a run directory
    (its newest verified checkpoint). Raises :class:`StartFromError` naming what was looked for."""
    path = Path(spec)
    run, sep, tail = spec.rpartition("@")
    if not path.exists() and sep and tail == "best":
        best = best_checkpoint(Path(run)) if run and Path(run).is_dir() else None
        if best is None:
            raise StartFromError(
                f"--from {spec}: '{run}' has no rated milestone that verifies ({BEST_FILE}); pass the run "
                "directory (its newest checkpoint) or RUN@STEP."
            )
        return _verified(best, "best-rated milestone", keep_step)
    if not path.exists() and sep and tail.replace("_", "").isdigit():
        if not Path(run).is_dir():
            raise StartFromError(f"--from {spec}: run directory '{run}' does not exist.")
        return _by_step(Path(run), int(tail.replace("_", "")), spec, keep_step)
    if not path.exists():
        raise StartFromError(
            f"--from {spec}: no such file or folder. Pass a checkpoint or milestone folder, RUN@STEP (a "
            "milestone of a run) or a run directory."
        )
    if (path / "meta.json").is_file():
        kind = "milestone" if path.parent.parent.name == "milestones" else "checkpoint"
        return _verified(path, kind, keep_step)
    found = list_checkpoints(path / "checkpoints")
    skipped = []
    for candidate in found:
        try:
            verify_checkpoint(candidate)
        except CheckpointError as err:
            skipped.append(str(err))
            continue
        return _verified(candidate, f"newest checkpoint of {path}", keep_step)
    if skipped:
        raise StartFromError(f"--from {spec}: no checkpoint of that run verifies: {' | '.join(skipped)}.")
    known = _milestone_steps(path)
    inside = [p.name for p in list_checkpoints(path)]
    if known:
        hint = f" It has milestones ({', '.join(known[-4:])}): pass {spec}@STEP."
    elif inside:
        hint = f" It holds the checkpoints {', '.join(inside[:4])}: pass one of them, e.g. {path / inside[0]}."
    elif path.name == "milestones" and _milestone_steps(path.parent):
        hint = f" Its milestones: {', '.join(_milestone_steps(path.parent)[-4:])}: pass {path.parent}@STEP."
    else:
        hint = ""
    raise StartFromError(f"--from {spec}: neither a checkpoint folder nor a run directory with checkpoints.{hint}")


# the config keys that decide the observation size and the action count, for the messages
_OBS_KEYS = ("blue_size", "orange_size", "obs_team_size", "obs_builder", "nearest_pads", "frame_stack")


def _section(config: dict[str, Any] | None, name: str) -> dict[str, Any]:
    value = (config or {}).get(name)
    return value if isinstance(value, dict) else {}


def _env_differences(theirs: dict[str, Any] | None, ours: dict[str, Any], keys: tuple[str, ...]) -> str:
    t, o = _section(theirs, "env"), _section(ours, "env")
    diffs = [f"env.{k}={t[k]!r} (this config: {o.get(k)!r})" for k in keys if k in t and t.get(k) != o.get(k)]
    return "; the checkpoint was trained with " + ", ".join(diffs) if diffs else ""


def compat_problems(meta: dict[str, Any], compat: dict[str, Any], cfg: Config) -> list[str]:
    """Each difference between the checkpoint's network signature and this config's, with what would fit."""
    theirs: dict[str, Any] = meta.get("compat") or {}
    their_cfg = meta.get("config") if isinstance(meta.get("config"), dict) else None
    ours_cfg = config_to_dict(cfg)
    problems = []
    for key in sorted(set(theirs) | set(compat)):
        have, want = theirs.get(key), compat.get(key)
        if have == want:
            continue
        text = f"{key}: checkpoint {have!r}, this config {want!r}"
        if key in ("policy_layers", "critic_layers") and isinstance(have, list):
            text += f" -> add --set ppo.{key}=[{','.join(str(v) for v in have)}]"
        elif key == "obs_dim":
            text += " (observation floats)" + _env_differences(their_cfg, ours_cfg, _OBS_KEYS)
        elif key == "num_actions":
            text += " (action count)" + _env_differences(their_cfg, ours_cfg, ("action_table", "action_form"))
        elif key == "action_form":
            text += f" -> add --set env.action_form={have}"
        elif key == "recurrent":
            text += " -> use the checkpoint's algo and recurrent.* settings" if have else " -> use --algo ppo"
        elif key == "algo" and isinstance(have, str):
            text += f" -> add --algo {have}"
        elif key == "env_id" and isinstance(have, str):
            text += f" -> use --env gym:{have}"
        problems.append(text)
    return problems


def check_fits(start: StartPoint, compat: dict[str, Any], cfg: Config) -> None:
    """Refuse a start point whose network does not fit this run's (nothing has been created yet)."""
    problems = compat_problems(start.meta, compat, cfg)
    if problems:
        raise StartFromError(
            f"--from {start.path}: its network does not fit this run's: {'; '.join(problems)}. Nothing was "
            "created or changed. Use a config with the same inputs and outputs (the checkpoint's own config is "
            "in its meta.json), or start from another checkpoint."
        )


def check_target(start: StartPoint, run_dir: Path, new: bool) -> None:
    """Refuse to warm-start into a run directory that has checkpoints (never mix two runs) or that holds
    the start point itself."""
    run_dir = run_dir.resolve()
    if start.path.is_relative_to(run_dir):
        raise StartFromError(
            f"--from {start.path} lies inside the run directory '{run_dir}' of the new run; pass another "
            "--run-dir for the new run (the source run stays as it is)."
        )
    if not new and list_checkpoints(run_dir / "checkpoints"):
        raise StartFromError(
            f"run directory '{run_dir}' already has checkpoints, and --from starts a new run: nothing was "
            "changed. Pass an empty --run-dir for the new run, add --new to move the old run aside first, or "
            "drop --from to resume that run."
        )
