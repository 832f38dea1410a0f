"""Run directories: create, archive on ``--new``, find the checkpoint to resume from."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speedflip.train.checkpoint import CheckpointError, list_checkpoints, verify_checkpoint


class RunDirError(RuntimeError):
    """A run directory that cannot be used; the message says why and what to do."""


@dataclass
class ResumePlan:
    """Where a run starts: the checkpoint to load (None = fresh), the checkpoints skipped and why, the
    folder an old run was moved to (``--new``), and notes on leftovers of interrupted saves."""

    checkpoint: Path | None
    skipped: list[str] = field(default_factory=list)
    archived_to: Path | None = None
    leftovers: list[str] = field(default_factory=list)


_TMP_NAME = re.compile(r"^\.tmp-(\d+)-(\d+)$")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def interrupted_saves(checkpoints_dir: Path) -> list[str]:
    """Notes on ``.tmp-<step>-<pid>`` folders left by saves whose process is gone (killed mid-save).

    They were never renamed into place, so they are not checkpoints and are never loaded. They are
    left where they are (nothing in a run directory is deleted behind the user's back); the note says
    they are safe to delete. A folder whose process still runs is a save in progress and not reported.
    """
    notes: list[str] = []
    if not checkpoints_dir.is_dir():
        return notes
    for entry in sorted(checkpoints_dir.iterdir()):
        match = _TMP_NAME.match(entry.name)
        if match is None or not entry.is_dir() or _pid_alive(int(match.group(2))):
            continue
        notes.append(
            f"'{entry}' is the unfinished save of step {match.group(1)} by process {match.group(2)}, which "
            "stopped mid-save; it was never a checkpoint, is ignored and can be deleted"
        )
    return notes


def compat_signature(
    obs_dim: int,
    num_actions: int,
    policy_layers: list[int],
    critic_layers: list[int],
    action_form: str = "table",
    recurrent: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What must match for a checkpoint to load into a model (``recurrent``: the LSTM/GRU core of a
    recurrent policy, see :func:`speedflip.models.build.recurrent_spec`; absent for feed-forward ones)."""
    signature: dict[str, Any] = {
        "obs_dim": obs_dim,
        "num_actions": num_actions,
        "policy_layers": list(policy_layers),
        "critic_layers": list(critic_layers),
        "action_form": action_form,
    }
    if recurrent is not None:
        signature["recurrent"] = dict(recurrent)
    return signature


def _ensure_writable(folder: Path, what: str = "run directory") -> None:
    if folder.exists() and not folder.is_dir():
        raise RunDirError(f"{what} '{folder}' is a file, not a folder. Choose another path with --run-dir.")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{os.getpid()}-{time.time_ns()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as err:
        raise RunDirError(
            f"{what} '{folder}' is not writable ({err.strerror or err}); nothing was started. Choose another "
            "with --run-dir, or fix its permissions / free space / remount it read-write."
        ) from None


def prepare_run_dir(run_dir: Path, compat: dict[str, Any], new: bool) -> ResumePlan:
    """Decide how to start in ``run_dir``: fresh, or resumed from its newest usable checkpoint.

    Nothing is deleted: ``--new`` moves an existing run aside to ``<run_dir>-archived-<time>``.
    A run directory whose checkpoints are all unusable, or built for another network, is an error
    (starting over silently would mix two runs' metrics and lose the user's checkpoints).
    """
    archived = None
    run_dir = run_dir.resolve()
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"run directory '{run_dir}' is a file, not a folder. Choose another path with --run-dir.")
    if new and run_dir.exists() and any(run_dir.iterdir()):
        archived = run_dir.with_name(f"{run_dir.name}-archived-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            run_dir.rename(archived)
        except OSError as err:
            raise RunDirError(f"cannot move the old run '{run_dir}' aside for --new: {err}") from None
    _ensure_writable(run_dir)
    _ensure_writable(run_dir / "checkpoints", "checkpoint folder")
    leftovers = interrupted_saves(run_dir / "checkpoints")
    found = list_checkpoints(run_dir / "checkpoints")
    if not found:
        return ResumePlan(None, archived_to=archived, leftovers=leftovers)
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
        return ResumePlan(path, skipped, archived, leftovers)
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
