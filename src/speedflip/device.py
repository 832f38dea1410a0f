"""Choosing the torch device: ``auto`` prefers a GPU, retries its initialisation, falls back to CPU.

ROCm builds of torch expose AMD GPUs through the same ``torch.cuda`` API, so "CUDA" below means
either; messages name the backend torch was built for.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

_DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


class DeviceError(RuntimeError):
    """An explicitly requested device that cannot be used; the message says what to do."""


@dataclass(frozen=True)
class DeviceChoice:
    """The device to use, a human-readable description, and a note to show the user (a fallback)."""

    device: torch.device
    description: str
    note: str | None = None


def gpu_backend() -> str:
    """``"ROCm"`` for a HIP build of torch, else ``"CUDA"``."""
    return "ROCm" if torch.version.hip else "CUDA"


def _probe(device: torch.device) -> str:
    """Allocate on ``device`` and wait for it; returns the GPU's name. Raises on a broken driver/device."""
    torch.zeros(1, device=device).add_(1)
    torch.cuda.synchronize(device)
    return str(torch.cuda.get_device_name(device))


def _init_with_retries(
    device: torch.device, retries: int, retry_delay: float, sleep: Callable[[float], None]
) -> tuple[str | None, str]:
    """Try to initialise ``device`` up to ``retries`` times; returns ``(gpu name or None, last error)``."""
    error = ""
    for attempt in range(max(1, retries)):
        try:
            return _probe(device), ""
        except RuntimeError as err:  # CUDA/HIP init errors (torch.AcceleratorError is a RuntimeError)
            error = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            if attempt + 1 < retries:
                sleep(retry_delay * (attempt + 1))
    return None, error


def resolve_device(
    name: str = "auto",
    retries: int = 3,
    retry_delay: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> DeviceChoice:
    """Turn ``run.device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``) into a working device.

    - ``cpu``: the CPU.
    - ``auto``: the first GPU when torch sees one and it initialises (``retries`` attempts, waiting
      ``retry_delay``, ``2 * retry_delay``, ... between them); otherwise the CPU, with a ``note``
      saying why when a GPU was present but failed.
    - ``cuda`` / ``cuda:N``: that GPU or a :class:`DeviceError` explaining what is wrong (an explicit
      request is never silently replaced by the CPU).
    """
    if not _DEVICE_RE.match(name):
        raise DeviceError(f"unknown device '{name}': use auto, cpu, cuda or cuda:N")
    if name == "cpu":
        return DeviceChoice(torch.device("cpu"), "cpu")
    backend = gpu_backend()
    available = torch.cuda.is_available()
    if name == "auto":
        if not available:
            return DeviceChoice(torch.device("cpu"), f"cpu (no {backend} device visible to torch)")
        device = torch.device("cuda", 0)
        gpu, error = _init_with_retries(device, retries, retry_delay, sleep)
        if gpu is None:
            note = (
                f"{backend} device {device} is present but failed to initialise {max(1, retries)} times "
                f"({error}); falling back to the CPU. Check the driver (nvidia-smi / rocm-smi) and "
                "CUDA_VISIBLE_DEVICES, or set run.device=cpu to skip the GPU."
            )
            return DeviceChoice(torch.device("cpu"), "cpu (GPU fallback)", note)
        return DeviceChoice(device, f"{device} ({gpu}, {backend})")
    if not available:
        build = torch.version.cuda or torch.version.hip
        why = "this torch build has no GPU support (CPU-only wheel)" if build is None else "no GPU or driver found"
        raise DeviceError(
            f"run.device is '{name}' but {why}. Use run.device=auto (GPU when present, else CPU) or "
            f"run.device=cpu, or install a {backend} build of torch."
        )
    device = torch.device(name)
    index = device.index or 0
    count = torch.cuda.device_count()
    if index >= count:
        raise DeviceError(f"run.device is '{name}' but only {count} GPU(s) are visible (cuda:0..cuda:{count - 1})")
    device = torch.device("cuda", index)
    gpu, error = _init_with_retries(device, retries, retry_delay, sleep)
    if gpu is None:
        raise DeviceError(
            f"{device} failed to initialise {max(1, retries)} times ({error}). Check the driver and "
            "CUDA_VISIBLE_DEVICES, or use run.device=auto to fall back to the CPU."
        )
    return DeviceChoice(device, f"{device} ({gpu}, {backend})")


def default_torch_threads(cores: int) -> int:
    """Half the cores, at least one. The policy's batches are small and torch's worker threads spin
    while they wait: measured on 2 cores with other processes running, 2 torch threads made
    collection 6x and the PPO update 5x slower than 1 thread (docs/performance.md)."""
    return max(1, cores // 2)


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch's intra-op thread count set to ``count`` inside the block."""
    before = torch.get_num_threads()
    if count == before:
        yield
        return
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)
