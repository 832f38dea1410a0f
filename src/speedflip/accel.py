"""Mixed precision, ``torch.compile`` and guarded optimizer steps, one place for every algorithm.

- :class:`GradientStep` does backward, gradient clipping and the optimizer step. With AMP on CUDA it
  scales the loss (``torch.amp.GradScaler('cuda')``); a step whose loss or gradients are NaN/Inf is
  skipped (the weights stay as they were) and reported, so callers can count and react.
- ``run.update_precision=bfloat16`` autocasts the loss's forward pass to bfloat16 (no scaler: bfloat16
  has float32's range). On a CPU with native bfloat16 instructions the 1v1 update is about twice as
  fast; the weights, the optimizer and the loss stay float32 (docs/performance.md).
- :func:`compile_networks` wraps networks with ``torch.compile`` and runs one forward to prove it
  works; any failure falls back to eager mode with a note (compilers are missing on many machines).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass
class GradientStepResult:
    """What one guarded optimizer step did."""

    grad_norm: float
    applied: bool  # False: NaN/Inf loss or gradients, the step was skipped


@dataclass
class GradientStep:
    """Backward + clip + step, with optional AMP. Build with :func:`make_gradient_step`."""

    device: torch.device
    notes: list[str] = field(default_factory=list)
    scaler: torch.amp.GradScaler | None = None  # run.amp on CUDA (float16)
    dtype: torch.dtype | None = None  # the autocast dtype: float16 (run.amp), bfloat16 (run.update_precision)

    @property
    def amp(self) -> bool:
        """float16 AMP with a gradient scaler (CUDA)."""
        return self.scaler is not None

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        """Forward passes of the loss run under this: autocast to :attr:`dtype` on the device when set."""
        if self.dtype is None:
            yield
            return
        with torch.autocast(device_type=self.device.type, dtype=self.dtype):
            yield

    def __call__(
        self, loss: torch.Tensor, optimizer: torch.optim.Optimizer, params: Iterable[nn.Parameter], max_grad_norm: float
    ) -> GradientStepResult:
        params = list(params)
        optimizer.zero_grad(set_to_none=True)
        if not bool(torch.isfinite(loss.detach())):
            return GradientStepResult(float("nan"), False)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(optimizer)
            grad_norm = nn.utils.clip_grad_norm_(params, max_grad_norm)
            finite = bool(torch.isfinite(grad_norm))
            self.scaler.step(optimizer)  # skips the step itself when gradients overflowed
            self.scaler.update()
            # Overflow under AMP is routine (the scaler skipped the step and lowers its scale), so it
            # is not reported as a fault; only a non-finite loss is.
            return GradientStepResult(float(grad_norm) if finite else float("nan"), True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(params, max_grad_norm)
        if not bool(torch.isfinite(grad_norm)):
            optimizer.zero_grad(set_to_none=True)
            return GradientStepResult(float(grad_norm), False)
        optimizer.step()
        return GradientStepResult(float(grad_norm), True)


def cpu_has_native_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices natively (x86 AVX512-BF16 or AMX tiles)."""
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def resolve_update_precision(precision: str, device: torch.device, bfloat16_pays: bool) -> str:
    """``run.update_precision`` made concrete: ``"float32"`` or ``"bfloat16"``. ``"auto"`` picks bfloat16
    only where it was measured to pay (``bfloat16_pays``: the caller's model and environment, e.g. the
    feed-forward Rocket League networks) on a CPU with native bfloat16 instructions."""
    if precision != "auto":
        return precision
    native = device.type == "cpu" and cpu_has_native_bfloat16()
    return "bfloat16" if native and bfloat16_pays else "float32"


def make_gradient_step(device: torch.device, amp: bool, precision: str = "float32") -> GradientStep:
    """AMP only where it helps and is supported (CUDA); elsewhere a note says it is off. ``precision``
    (``"float32"`` or ``"bfloat16"``, see :func:`resolve_update_precision`) autocasts without a scaler."""
    if precision == "bfloat16":
        note = "update in bfloat16 autocast (output layers, loss, weights and optimizer in float32)"
        if device.type == "cpu" and not cpu_has_native_bfloat16():
            note += "; this CPU has no native bfloat16 instructions, so it is likely slower than float32"
        return GradientStep(device, [note], dtype=torch.bfloat16)
    if amp and device.type != "cuda":
        return GradientStep(device, [f"run.amp is for CUDA devices; training on {device} in float32"])
    if amp:
        scaler = torch.amp.GradScaler("cuda")
        return GradientStep(device, ["mixed precision: float16 autocast + GradScaler"], scaler, torch.float16)
    return GradientStep(device)


def compile_networks(networks: dict[str, nn.Module], example: torch.Tensor, notes: list[str]) -> dict[str, nn.Module]:
    """``torch.compile`` each network and run it once on ``example``; the eager ones on any failure.

    The compiled wrappers share parameters with the originals, so state dicts and checkpoints are
    unchanged whichever is used.
    """
    compiled: dict[str, nn.Module] = {}
    try:
        for name, net in networks.items():
            fn = torch.compile(net, dynamic=True)
            with torch.no_grad():
                fn(example)
            compiled[name] = fn  # type: ignore[assignment]
    except Exception as err:  # any compiler failure means: run eagerly
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        notes.append(f"torch.compile failed ({type(err).__name__}: {first[:160]}); running eagerly")
        return dict(networks)
    notes.append("torch.compile: networks compiled")
    return compiled
