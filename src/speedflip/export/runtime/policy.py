"""The policy network without torch: a safetensors reader and a numpy MLP (ReLU between layers).

When torch is installed the agent can run the same layers with torch instead (``backend="torch"``),
which reproduces training's forward pass exactly.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np

from speedflip._types import Array

_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def read_safetensors(path: Path) -> dict[str, Array]:
    """Tensors of a ``.safetensors`` file as numpy arrays (the format: 8-byte header size, JSON header, data)."""
    raw = path.read_bytes()
    if len(raw) < 8:
        raise ValueError(f"{path} is not a safetensors file (too short)")
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    data = memoryview(raw)[8 + size :]
    out: dict[str, Array] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        start, end = info["data_offsets"]
        out[name] = np.frombuffer(data[start:end], dtype=np.dtype(dtype).newbyteorder("<")).reshape(info["shape"])
    return out


def write_safetensors(path: Path, tensors: dict[str, Array], metadata: dict[str, str] | None = None) -> None:
    """Write numpy arrays as a ``.safetensors`` file (little-endian, C order)."""
    names = {np.dtype(v).name: k for k, v in _DTYPES.items()}
    header: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    blobs = []
    offset = 0
    for name, value in tensors.items():
        arr = np.ascontiguousarray(value)
        blob = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {
            "dtype": names[arr.dtype.name],
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


class NumpyPolicy:
    """``policy.<i>.weight`` / ``policy.<i>.bias`` layers of speedflip's ``ActorCritic``, as numpy."""

    def __init__(self, tensors: dict[str, Array]) -> None:
        indices = sorted({int(k.split(".")[1]) for k in tensors if k.startswith("policy.") and k.endswith(".weight")})
        if not indices:
            raise ValueError("no policy layers (policy.<i>.weight) in the weights file")
        self.weights = [np.ascontiguousarray(tensors[f"policy.{i}.weight"].T, dtype=np.float32) for i in indices]
        self.biases = [np.asarray(tensors[f"policy.{i}.bias"], dtype=np.float32) for i in indices]
        self.indices = indices

    @property
    def obs_dim(self) -> int:
        return int(self.weights[0].shape[0])

    @property
    def num_actions(self) -> int:
        return int(self.weights[-1].shape[1])

    def logits(self, x: Array) -> Array:
        """``[n, obs_dim]`` normalized observations -> ``[n, num_actions]`` logits (float32)."""
        h = np.asarray(x, np.float32)
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = h @ w + b
            if i < len(self.weights) - 1:
                h = np.maximum(h, 0.0)
        return h


class TorchPolicy:
    """The same layers run by torch (bit-for-bit what training computed on the same machine)."""

    def __init__(self, tensors: dict[str, Array]) -> None:
        import torch

        indices = sorted({int(k.split(".")[1]) for k in tensors if k.startswith("policy.") and k.endswith(".weight")})
        layers: list[torch.nn.Module] = []
        for n, i in enumerate(indices):
            w = torch.from_numpy(np.array(tensors[f"policy.{i}.weight"], np.float32))
            linear = torch.nn.Linear(w.shape[1], w.shape[0])
            with torch.no_grad():
                linear.weight.copy_(w)
                linear.bias.copy_(torch.from_numpy(np.array(tensors[f"policy.{i}.bias"], np.float32)))
            layers.append(linear)
            if n < len(indices) - 1:
                layers.append(torch.nn.ReLU())
        self.net = torch.nn.Sequential(*layers).eval()
        self._torch = torch

    def logits(self, x: Array) -> Array:
        with self._torch.no_grad():
            out: Array = self.net(self._torch.as_tensor(np.asarray(x, np.float32))).numpy()
        return out
