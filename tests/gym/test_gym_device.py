"""Device choice: auto -> GPU when it works, retries, CPU fallback with a note; explicit requests never fall back."""

from __future__ import annotations

import pytest
import torch

import speedflip.device as device_mod
from speedflip.device import DeviceError, resolve_device


def _no_sleep(_: float) -> None:
    return None


def test_cpu_and_auto_without_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("cpu").device == torch.device("cpu")
    choice = resolve_device("auto")
    assert choice.device == torch.device("cpu") and choice.note is None
    assert "no CUDA device" in choice.description or "no ROCm device" in choice.description


def test_auto_retries_then_falls_back_with_a_clear_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    calls: list[torch.device] = []

    def broken(device: torch.device) -> str:
        calls.append(device)
        raise RuntimeError("CUDA error: initialization error\nmore details")

    monkeypatch.setattr(device_mod, "_probe", broken)
    waits: list[float] = []
    choice = resolve_device("auto", retries=3, retry_delay=0.5, sleep=waits.append)
    assert len(calls) == 3 and waits == [0.5, 1.0]
    assert choice.device == torch.device("cpu")
    assert choice.note is not None
    assert "failed to initialise 3 times" in choice.note and "initialization error" in choice.note
    assert "falling back to the CPU" in choice.note and "run.device=cpu" in choice.note


def test_auto_succeeds_after_a_transient_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    attempts = iter([RuntimeError("busy"), "Fake GPU"])

    def flaky(device: torch.device) -> str:
        outcome = next(attempts)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(device_mod, "_probe", flaky)
    choice = resolve_device("auto", sleep=_no_sleep)
    assert choice.device == torch.device("cuda", 0) and choice.note is None
    assert "Fake GPU" in choice.description


def test_explicit_cuda_errors_instead_of_falling_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceError, match=r"run\.device=auto"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(DeviceError, match="only 1 GPU"):
        resolve_device("cuda:1")

    def broken(device: torch.device) -> str:
        raise RuntimeError("no kernel image")

    monkeypatch.setattr(device_mod, "_probe", broken)
    with pytest.raises(DeviceError, match="failed to initialise 2 times"):
        resolve_device("cuda:0", retries=2, sleep=_no_sleep)
    with pytest.raises(DeviceError, match="unknown device"):
        resolve_device("tpu")


def test_rocm_builds_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.version, "hip", "6.0", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "ROCm" in resolve_device("auto").description
