"""Numerical guards for a learner: bad updates are counted, the last good weights come back, a run that
keeps diverging stops with a diagnosis.

- a batch holding NaN/Inf is not trained on (:func:`nonfinite_fields` names the tensors);
- a NaN/Inf loss or gradient skips that minibatch (done by :class:`speedflip.accel.GradientStep`);
- after ``max_bad_updates`` bad updates in a row (at once if the weights themselves went non-finite)
  the last good weights and optimizer state are restored;
- ``max_restores`` restores in a row raise :class:`TrainingDivergedError`, with the good weights loaded.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from speedflip.errors import RunStoppedError


class TrainingDivergedError(RunStoppedError):
    """NaN/Inf losses or gradients persisted through restores of the last good weights."""


def nonfinite_fields(fields: dict[str, torch.Tensor]) -> list[str]:
    """Names of the float tensors in ``fields`` that hold NaN or Inf."""
    return [name for name, tensor in fields.items() if not bool(torch.isfinite(tensor).all())]


def weights_finite(model: torch.nn.Module) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


class UpdateGuard:
    """Watches one network and its optimizer across updates (see the module docstring)."""

    def __init__(
        self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, max_bad_updates: int, max_restores: int
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.max_bad_updates = max_bad_updates
        self.max_restores = max_restores
        self.bad_updates_in_row = 0
        self.restores_in_row = 0
        self.total_bad_updates = 0
        self.total_restores = 0
        self.last_reason = ""
        self._good = self.snapshot()

    def snapshot(self) -> dict[str, Any]:
        """Remember the current weights and optimizer state as the last good ones."""
        self._good = {
            "model": {k: v.detach().clone() for k, v in self.model.state_dict().items()},
            "optimizer": copy.deepcopy(self.optimizer.state_dict()),
        }
        return self._good

    def after_update(self, reason: str | None, poisoned: bool, where: str) -> None:
        """Record one update: ``reason`` says what was bad (None: a good update), ``poisoned`` that the
        weights themselves went non-finite; ``where`` names the point of training for the message."""
        if reason is None:
            self.bad_updates_in_row = 0
            self.restores_in_row = 0
            self.snapshot()
            return
        self.total_bad_updates += 1
        self.bad_updates_in_row += 1
        self.last_reason = reason
        if self.bad_updates_in_row < self.max_bad_updates and not poisoned:
            return  # this update's bad minibatches were skipped; the weights are still the good ones
        self.model.load_state_dict(self._good["model"])
        self.optimizer.load_state_dict(copy.deepcopy(self._good["optimizer"]))
        self.bad_updates_in_row = 0
        self.restores_in_row += 1
        self.total_restores += 1
        if self.restores_in_row >= self.max_restores:
            raise TrainingDivergedError(
                f"training diverged at {where}: {reason}, and {self.restores_in_row} restores of the last good "
                "weights in a row did not help. The model now holds the last good weights. Likely causes: a "
                "learning rate too high (ppo.learning_rate), reward weights giving huge or NaN rewards (see "
                "rewards/* in metrics.jsonl), NaN observations from a custom component. Fix the cause, then resume."
            )
