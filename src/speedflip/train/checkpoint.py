"""Checkpoints: tensors (safetensors) + JSON, written atomically, verified by checksum on load.

Layout of ``checkpoints/<global_step>/``::

    model.safetensors       policy and critic weights
    optimizer.safetensors   optimizer tensors, with optimizer.json for hyper-parameters
    state.safetensors       normalizers and torch RNG states
    meta.json               counters, numpy RNG state, run metadata, SHA-256 of every file above

A checkpoint is first written to a hidden temporary folder, flushed to disk, then renamed into
place, so a crash mid-save never leaves a half-written ``<global_step>/`` folder behind. Nothing
pickled is ever written or read.
"""

from __future__ import annotations

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
from safetensors.torch import load_file, save_file

from speedflip._types import Array
from speedflip.train.jsonsafe import dumps

FORMAT_VERSION = 1
TENSOR_FILES = ("model.safetensors", "optimizer.safetensors", "state.safetensors")


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


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    """Write ``checkpoints_dir/<step>/`` atomically and keep only the newest ``keep`` checkpoints."""
    checkpoints_dir.mkdir(parents=True, exist_ok=True)
    final = checkpoints_dir / str(step)
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
    tmp.mkdir()
    try:
        save_file(ckpt.model, str(tmp / "model.safetensors"))
        save_file(ckpt.optimizer_tensors, str(tmp / "optimizer.safetensors"))
        save_file(ckpt.state_tensors, str(tmp / "state.safetensors"))
        (tmp / "optimizer.json").write_text(dumps(ckpt.optimizer_meta))
        files = [*TENSOR_FILES, "optimizer.json"]
        meta = dict(ckpt.meta)
        meta["format_version"] = FORMAT_VERSION
        meta["global_step"] = step
        meta["saved_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        meta["sha256"] = {name: _sha256(tmp / name) for name in files}
        (tmp / "meta.json").write_text(dumps(meta, indent=2))
        for name in [*files, "meta.json"]:
            _fsync_file(tmp / name)
        _fsync_dir(tmp)
        os.replace(tmp, final)
        _fsync_dir(checkpoints_dir)
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
    corrupt folder with a high step can never push the good ones out.
    """
    good = []
    for path in list_checkpoints(checkpoints_dir):
        try:
            verify_checkpoint(path)
        except CheckpointError:
            continue
        good.append(path)
    for old in good[keep:]:
        if old != protect:
            shutil.rmtree(old, ignore_errors=True)


def read_meta(path: Path) -> dict[str, Any]:
    meta_path = path / "meta.json"
    if not meta_path.is_file():
        raise CheckpointError(f"{path}: meta.json is missing (partial checkpoint)")
    try:
        meta = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path}: meta.json is corrupt ({err})") from None
    if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{path}: unknown checkpoint format (expected format_version {FORMAT_VERSION})")
    return meta


def verify_checkpoint(path: Path) -> dict[str, Any]:
    """Check every file against the checksums in meta.json; returns the meta."""
    meta = read_meta(path)
    sums = meta.get("sha256")
    if not isinstance(sums, dict) or not sums:
        raise CheckpointError(f"{path}: meta.json has no checksums")
    for name, expected in sums.items():
        file = path / name
        if not file.is_file():
            raise CheckpointError(f"{path}: {name} is missing")
        if _sha256(file) != expected:
            raise CheckpointError(f"{path}: {name} does not match its checksum (truncated or modified)")
    return meta


def load_checkpoint(path: Path) -> Checkpoint:
    """Verify and load a checkpoint folder."""
    meta = verify_checkpoint(path)
    try:
        model = load_file(str(path / "model.safetensors"))
        optimizer_tensors = load_file(str(path / "optimizer.safetensors"))
        state_tensors = load_file(str(path / "state.safetensors"))
        optimizer_meta = json.loads((path / "optimizer.json").read_text())
    except (OSError, ValueError, RuntimeError) as err:  # safetensors raises these on bad data
        raise CheckpointError(f"{path}: cannot be read ({err})") from None
    return Checkpoint(model, optimizer_tensors, optimizer_meta, state_tensors, meta)


def to_numpy_dict(tensors: dict[str, torch.Tensor], prefix: str) -> dict[str, Array]:
    return {k[len(prefix) :]: v.numpy() for k, v in tensors.items() if k.startswith(prefix)}


def from_numpy_dict(arrays: dict[str, Array], prefix: str) -> dict[str, torch.Tensor]:
    return {prefix + k: torch.from_numpy(np.ascontiguousarray(np.asarray(v))) for k, v in arrays.items()}
