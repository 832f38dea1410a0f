"""Run directories: create, archive on ``--new``, find the checkpoint to resume from."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speedflip.train.checkpoint import CheckpointError, list_checkpoints, verify_checkpoint


class RunDirError(RuntimeError):
    """A run directory that cannot be used; the message says why and what to do."""


@dataclass
class ResumePlan:
    checkpoint: Path | None
    skipped: list[str] = field(default_factory=list)
    archived_to: Path | None = None


def compat_signature(
    obs_dim: int, num_actions: int, policy_layers: list[int], critic_layers: list[int], action_form: str = "table"
) -> dict[str, Any]:
    """What must match for a checkpoint to load into a model."""
    return {
        "obs_dim": obs_dim,
        "num_actions": num_actions,
        "policy_layers": list(policy_layers),
        "critic_layers": list(critic_layers),
        "action_form": action_form,
    }


def _ensure_writable(run_dir: Path) -> None:
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / f".write-test-{time.time_ns()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as err:
        raise RunDirError(
            f"run directory '{run_dir}' is not writable ({err.strerror}). Choose another with --run-dir "
            "or fix its permissions."
        ) from None


def prepare_run_dir(run_dir: Path, compat: dict[str, Any], new: bool) -> ResumePlan:
    """Decide how to start in ``run_dir``: fresh, or resumed from its newest usable checkpoint.

    Nothing is deleted: ``--new`` moves an existing run aside to ``<run_dir>-archived-<time>``.
    A run directory whose checkpoints are all unusable, or built for another network, is an error
    (starting over silently would mix two runs' metrics and lose the user's checkpoints).
    """
    archived = None
    run_dir = run_dir.resolve()
    if new and run_dir.exists() and any(run_dir.iterdir()):
        archived = run_dir.with_name(f"{run_dir.name}-archived-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            run_dir.rename(archived)
        except OSError as err:
            raise RunDirError(f"cannot move the old run '{run_dir}' aside for --new: {err}") from None
    _ensure_writable(run_dir)
    (run_dir / "checkpoints").mkdir(exist_ok=True)
    found = list_checkpoints(run_dir / "checkpoints")
    if not found:
        return ResumePlan(None, archived_to=archived)
    skipped: list[str] = []
    mismatches: list[str] = []
    for path in found:
        try:
            meta = verify_checkpoint(path)
        except CheckpointError as err:
            skipped.append(str(err))
            continue
        theirs = meta.get("compat", {})
        diff = [f"{k}: checkpoint {theirs.get(k)!r} vs config {v!r}" for k, v in compat.items() if theirs.get(k) != v]
        if diff:
            mismatches.append(f"{path.name} ({'; '.join(diff)})")
            skipped.append(f"{path}: incompatible with the current config ({'; '.join(diff)})")
            continue
        return ResumePlan(path, skipped, archived)
    if mismatches:
        raise RunDirError(
            f"run directory '{run_dir}' holds checkpoints of a different setup: {', '.join(mismatches)}. "
            "Use the config that run was started with (it is saved as config.yaml there), start a "
            "fresh run with --new (the old one is kept, moved aside), or pick another --run-dir."
        )
    raise RunDirError(
        f"run directory '{run_dir}' has checkpoints but none can be loaded: {' | '.join(skipped)}. "
        "They were left untouched. Start a fresh run with --new (the old one is moved aside) or pick "
        "another --run-dir."
    )
