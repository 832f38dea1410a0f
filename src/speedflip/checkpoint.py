"""Checkpoints: tensors (safetensors) + JSON, written atomically, verified by checksum on load.

Layout of ``checkpoints/<global_step>/``::

    model.safetensors       policy and critic weights
    optimizer.safetensors   optimizer tensors, with optimizer.json for hyper-parameters
    state.safetensors       normalizers and torch RNG states
    meta.json               counters, numpy RNG state, run metadata, SHA-256 of every file above

A checkpoint is first written to a hidden temporary folder, every file and the folder flushed to
disk (fsync), then renamed into place and the parent folder flushed, so a crash or power loss
mid-save never leaves a half-written ``<global_step>/`` folder behind. ``meta.json`` carries a
checksum of itself as well, so a damaged meta is detected like a damaged tensor file. A failed save
(disk full, quota, file-size limit, read-only disk) removes its temporary folder, leaves the earlier
checkpoints as they were and raises :class:`CheckpointError` with the cause and the fix. Tensors
holding NaN/Inf are never saved. Loading hashes the very bytes it deserializes, so what is loaded is
what was verified. Nothing pickled is ever written or read.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_bytes
from safetensors.torch import save as save_bytes

from speedflip._types import Array
from speedflip.config import Config, config_to_dict
from speedflip.jsonsafe import dumps
from speedflip.provenance import config_hash, git_commit

FORMAT_VERSION = 1
TENSOR_FILES = ("model.safetensors", "optimizer.safetensors", "state.safetensors")
META_CHECKSUM_KEY = "meta_sha256"
SAVE_DELAY_ENV = "SPEEDFLIP_FAULT_SAVE_DELAY"
"""Test hook of the fault-injection suite: seconds to sleep after a checkpoint's files are written and
before its folder is renamed into place (widens the window in which a kill lands mid-save)."""


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used (corrupt, partial or from an incompatible run)."""


@dataclass
class Checkpoint:
    """Everything needed to continue a run, as plain tensors and JSON."""

    model: dict[str, torch.Tensor]
    optimizer_tensors: dict[str, torch.Tensor]
    optimizer_meta: dict[str, Any]
    state_tensors: dict[str, torch.Tensor]
    meta: dict[str, Any] = field(default_factory=dict)


def _meta_digest(meta: dict[str, Any]) -> str:
    """SHA-256 of ``meta`` (without its own checksum) in a canonical JSON form."""
    body = {k: v for k, v in meta.items() if k != META_CHECKSUM_KEY}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _write_synced(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file and fsync it before returning."""
    with path.open("xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - some filesystems cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


_WRITE_ERRORS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EFBIG: "a file would exceed the file-size limit (ulimit -f)",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}


def describe_write_error(err: OSError) -> str:
    """A short cause for an ``OSError`` raised while writing (``the disk is full (No space left ...)``)."""
    cause = _WRITE_ERRORS.get(err.errno or 0)
    detail = err.strerror or str(err)
    return f"{cause} ({detail})" if cause else detail


def _save_error(final: Path, err: OSError) -> CheckpointError:
    where = final.parent
    return CheckpointError(
        f"could not save checkpoint '{final}': {describe_write_error(err)}. The unfinished files were removed "
        f"and the earlier checkpoints in '{where}' are intact. Free space on that disk (or raise the quota / "
        "file-size limit, or fix its permissions), or copy the run directory to another disk and point "
        "--run-dir there; then run the same command to resume from the last checkpoint."
    )


def check_finite(ckpt: Checkpoint) -> None:
    """Raise :class:`CheckpointError` if a model or optimizer tensor holds NaN or Inf."""
    for part, tensors in (("model", ckpt.model), ("optimizer", ckpt.optimizer_tensors)):
        for name, tensor in tensors.items():
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                raise CheckpointError(
                    f"refusing to save NaN/Inf: {part} tensor '{name}' has non-finite values (training "
                    "diverged). Nothing was written; the earlier checkpoints are intact. Resume from the last "
                    "one, e.g. with a lower ppo.learning_rate or ppo.max_grad_norm."
                )


def optimizer_to_tensors(state: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Flatten ``optimizer.state_dict()`` into named tensors plus JSON-able hyper-parameters."""
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, float]] = {}
    for pid, pstate in state["state"].items():
        for key, value in pstate.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{pid}.{key}"] = value.detach().cpu().contiguous()
            else:
                scalars.setdefault(str(pid), {})[key] = float(value)
    return tensors, {"param_groups": state["param_groups"], "scalars": scalars}


def optimizer_from_tensors(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`optimizer_to_tensors`."""
    state: dict[int, dict[str, Any]] = {}
    for name, value in tensors.items():
        pid, key = name.split(".", 1)
        state.setdefault(int(pid), {})[key] = value
    for pid, values in meta.get("scalars", {}).items():
        state.setdefault(int(pid), {}).update(values)
    return {"state": state, "param_groups": meta["param_groups"]}


def save_checkpoint(checkpoints_dir: Path, step: int, ckpt: Checkpoint, keep: int) -> Path:
    """Write ``checkpoints_dir/<step>/`` atomically and keep only the newest ``keep`` checkpoints.

    Raises :class:`CheckpointError` (nothing written, earlier checkpoints intact) when the state holds
    NaN/Inf or the disk refuses the write (full, quota, file-size limit, read-only, permissions).
    """
    check_finite(ckpt)
    final = checkpoints_dir / str(step)
    try:
        checkpoints_dir.mkdir(parents=True, exist_ok=True)
        if final.exists():
            try:
                verify_checkpoint(final)
                return final  # never overwrite a good checkpoint
            except CheckpointError:
                # a damaged folder at this step (e.g. the one a resume skipped): keep it aside, save anew
                final.rename(checkpoints_dir / f".corrupt-{step}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        tmp = checkpoints_dir / f".tmp-{step}-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
    except OSError as err:
        raise _save_error(final, err) from err
    try:
        tmp.mkdir()  # inside the try: an interrupt right after it still removes the folder
        contents = {
            "model.safetensors": save_bytes(ckpt.model),
            "optimizer.safetensors": save_bytes(ckpt.optimizer_tensors),
            "state.safetensors": save_bytes(ckpt.state_tensors),
            "optimizer.json": dumps(ckpt.optimizer_meta).encode(),
        }
        for name, data in contents.items():
            _write_synced(tmp / name, data)
        meta = dict(ckpt.meta)
        meta["format_version"] = FORMAT_VERSION
        meta["global_step"] = step
        meta["saved_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        meta["sha256"] = {name: hashlib.sha256(data).hexdigest() for name, data in contents.items()}
        meta = json.loads(dumps(meta))  # the JSON-safe form, as a reader will see it
        meta[META_CHECKSUM_KEY] = _meta_digest(meta)
        _write_synced(tmp / "meta.json", dumps(meta, indent=2).encode())
        _fsync_dir(tmp)
        delay = os.environ.get(SAVE_DELAY_ENV)
        if delay:
            time.sleep(float(delay))
        os.replace(tmp, final)
        _fsync_dir(checkpoints_dir)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _save_error(final, err) from err
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _rotate(checkpoints_dir, keep, protect=final)
    return final


def list_checkpoints(checkpoints_dir: Path) -> list[Path]:
    """Checkpoint folders, newest (highest step) first."""
    if not checkpoints_dir.is_dir():
        return []
    found = [p for p in checkpoints_dir.iterdir() if p.is_dir() and p.name.isdigit()]
    return sorted(found, key=lambda p: int(p.name), reverse=True)


def _rotate(checkpoints_dir: Path, keep: int, protect: Path) -> None:
    """Keep the newest ``keep`` checkpoints that verify; never delete ``protect`` (the one just written).

    Damaged checkpoints are not counted and not deleted (a resume skips them and says why), so a
    corrupt folder with a high step can never push the good ones out. A checkpoint is deleted by
    renaming it to ``.trash-<step>-<pid>`` and then removing that folder.
    """
    for leftover in checkpoints_dir.glob(".trash-*"):  # deletions a killed process did not finish
        shutil.rmtree(leftover, ignore_errors=True)
    good = []
    for path in list_checkpoints(checkpoints_dir):
        try:
            verify_checkpoint(path)
        except CheckpointError:
            continue
        good.append(path)
    for old in good[keep:]:
        if old != protect:
            # renamed out of the numbered names first (atomic), so a kill mid-delete never leaves a
            # half-deleted ``<step>/`` folder that looks like a checkpoint
            trash = checkpoints_dir / f".trash-{old.name}-{os.getpid()}"
            try:
                old.rename(trash)
            except OSError:
                continue
            shutil.rmtree(trash, ignore_errors=True)


def read_meta(path: Path) -> dict[str, Any]:
    """The parsed ``meta.json`` of a checkpoint folder (format checked, not yet the checksums)."""
    meta_path = path / "meta.json"
    if not meta_path.is_file():
        raise CheckpointError(f"{path}: meta.json is missing (partial checkpoint)")
    try:
        meta = json.loads(meta_path.read_bytes().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path}: meta.json is corrupt ({err})") from None
    except OSError as err:
        raise CheckpointError(f"{path}: meta.json cannot be read ({err.strerror or err})") from None
    if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{path}: unknown checkpoint format (expected format_version {FORMAT_VERSION})")
    return meta


def _read_verified(path: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The meta and the bytes of every checksummed file, each hashed as read."""
    meta = read_meta(path)
    sums = meta.get("sha256")
    if not isinstance(sums, dict) or not sums:
        raise CheckpointError(f"{path}: meta.json has no checksums")
    stored = meta.get(META_CHECKSUM_KEY)
    if stored is not None and stored != _meta_digest(meta):  # absent in checkpoints of older versions
        raise CheckpointError(f"{path}: meta.json does not match its checksum (modified or damaged)")
    contents: dict[str, bytes] = {}
    for name, expected in sums.items():
        file = path / name
        if not file.is_file():
            raise CheckpointError(f"{path}: {name} is missing")
        try:
            data = file.read_bytes()
        except OSError as err:
            raise CheckpointError(f"{path}: {name} cannot be read ({err.strerror or err})") from None
        if hashlib.sha256(data).hexdigest() != expected:
            raise CheckpointError(f"{path}: {name} does not match its checksum (truncated or modified)")
        contents[name] = data
    return meta, contents


def verify_checkpoint(path: Path) -> dict[str, Any]:
    """Check meta.json and every file against their checksums; returns the meta."""
    meta, _ = _read_verified(path)
    return meta


def load_checkpoint(path: Path) -> Checkpoint:
    """Verify and load a checkpoint folder (the bytes deserialized are the bytes verified)."""
    meta, contents = _read_verified(path)
    missing = [name for name in (*TENSOR_FILES, "optimizer.json") if name not in contents]
    if missing:
        raise CheckpointError(f"{path}: meta.json lists no checksum for {', '.join(missing)}")
    try:
        model = load_bytes(contents["model.safetensors"])
        optimizer_tensors = load_bytes(contents["optimizer.safetensors"])
        state_tensors = load_bytes(contents["state.safetensors"])
        optimizer_meta = json.loads(contents["optimizer.json"].decode("utf-8"))
    except (SafetensorError, ValueError, RuntimeError) as err:  # bad data despite a matching checksum
        raise CheckpointError(f"{path}: cannot be read ({err})") from None
    return Checkpoint(model, optimizer_tensors, optimizer_meta, state_tensors, meta)


def to_numpy_dict(tensors: dict[str, torch.Tensor], prefix: str) -> dict[str, Array]:
    return {k[len(prefix) :]: v.numpy() for k, v in tensors.items() if k.startswith(prefix)}


def from_numpy_dict(arrays: dict[str, Array], prefix: str) -> dict[str, torch.Tensor]:
    return {prefix + k: torch.from_numpy(np.ascontiguousarray(np.asarray(v))) for k, v in arrays.items()}


def make_checkpoint(
    model: dict[str, torch.Tensor],
    optimizer_state: dict[str, Any],
    tensors: dict[str, torch.Tensor],
    cfg: Config,
    meta: dict[str, Any],
) -> Checkpoint:
    """A checkpoint of a learner's state with the provenance every run records in ``meta.json``: the
    resolved config and its hash, the owner, the code's git commit, the speedflip and torch versions.
    ``meta`` holds the rest (counters, compat signature, RNG states, the session's own keys)."""
    from speedflip import __version__

    opt_tensors, opt_meta = optimizer_to_tensors(optimizer_state)
    provenance = {
        "config": config_to_dict(cfg),
        "config_hash": config_hash(cfg),
        "owner": cfg.run.owner,
        "git_commit": git_commit(),
        "speedflip_version": __version__,
        "torch_version": torch.__version__,
    }
    return Checkpoint(model, opt_tensors, opt_meta, tensors, {**provenance, **meta})


def run_lineage(run_dir: Path) -> list[dict[str, Any]]:
    """Where a run started (``--from``), newest start first, read from its newest readable checkpoint or
    milestone; ``[]`` for a run started from scratch (or one with nothing saved yet)."""
    candidates = list_checkpoints(run_dir / "checkpoints")
    milestones = run_dir / "milestones"
    if milestones.is_dir():
        candidates += [p for stage in sorted(milestones.iterdir()) if stage.is_dir() for p in list_checkpoints(stage)]
    for path in candidates:
        try:
            lineage = read_meta(path).get("lineage")
        except CheckpointError:
            continue
        return lineage if isinstance(lineage, list) else []
    return []


def describe_lineage(lineage: list[dict[str, Any]]) -> str:
    """``runs/a/milestones/main/64 (milestone, step 64) <- runs/b/checkpoints/32 (...)``, newest first."""
    parts = []
    for entry in lineage:
        kept = ", step kept" if entry.get("kept_step") else ""
        parts.append(f"{entry.get('from')} ({entry.get('kind')}, step {entry.get('global_step')}{kept})")
    return " <- ".join(parts)
