"""Choosing the hidden-layer activation of an already built network."""

from __future__ import annotations

from typing import Literal, TypeVar

from torch import nn

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh}
M = TypeVar("M", bound=nn.Module)


def set_activation(module: M, name: Literal["relu", "tanh"]) -> M:
    """Replace every ``nn.ReLU`` inside ``module`` (any depth) by ``name``'s activation; returns ``module``.

    The layer weights are untouched (they keep the orthogonal initialisation of
    :func:`speedflip.models.mlp.layer_init`), so this only changes the function between layers.
    """
    if name == "relu":
        return module
    activation = ACTIVATIONS[name]
    for parent in module.modules():
        for child_name, child in parent.named_children():
            if isinstance(child, nn.ReLU):
                setattr(parent, child_name, activation())
    return module
