"""Frozen feed-forward pool opponents of one architecture, acting in one batched pass.

In pool arenas every arena has its own opponent. With M snapshots in play, a step used to run M
separate forward passes over every car of every arena; on a CPU each pass of the 1v1 network costs a
few hundred microseconds, mostly call overhead, so eight snapshots cost more than the learner's own
inference. Here the snapshots' layers are stacked into ``[M, in, out]`` tensors and each layer is one
``torch.baddbmm`` over the rows each snapshot drives (grouped and padded to the largest group), with
each snapshot's own observation normalizer. The logits are those of
:class:`~speedflip.selfplay.policies.NeuralPolicy` up to float rounding (tests/selfplay/test_stacked.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from speedflip._types import Array
from speedflip.models.mlp import ActorCritic
from speedflip.selfplay.policies import NeuralPolicy


def _feed_forward(policies: Sequence[NeuralPolicy]) -> list[ActorCritic]:
    return [p.model for p in policies if isinstance(p.model, ActorCritic)]


def can_stack(policies: Sequence[NeuralPolicy]) -> bool:
    """Whether ``policies`` are feed-forward categorical ReLU policies with layers of the same shapes."""
    models = _feed_forward(policies)
    if not policies or len(models) != len(policies):
        return False
    if any(not isinstance(m, nn.Linear | nn.ReLU) for model in models for m in model.policy):
        return False
    shapes = {tuple(tuple(m.weight.shape) for m in model.policy if isinstance(m, nn.Linear)) for model in models}
    return len(shapes) == 1 and {model.head_kind for model in models} == {"categorical"}


class StackedPolicies:
    """Several frozen :class:`NeuralPolicy` networks (see :func:`can_stack`) as one batched player.

    ``act(obs, members)`` returns an action index per row, row ``r`` played by ``policies[members[r]]``
    (its most likely action when that policy is deterministic, else a sample drawn with ``seed``'s
    generator).
    """

    def __init__(self, policies: Sequence[NeuralPolicy], seed: int = 0) -> None:
        if not can_stack(policies):
            raise ValueError("StackedPolicies needs feed-forward categorical policies with the same layer shapes")
        self.count = len(policies)
        per_model = [[m for m in model.policy if isinstance(m, nn.Linear)] for model in _feed_forward(policies)]
        depth = len(per_model[0])
        # [M, in, out] weights and [M, 1, out] biases per layer, so that x [M, R, in] @ W + b -> [M, R, out]
        self.weights = [torch.stack([layers[i].weight.detach().T for layers in per_model]) for i in range(depth)]
        self.biases = [torch.stack([layers[i].bias.detach() for layers in per_model])[:, None, :] for i in range(depth)]
        self.mean = np.stack([p.obs_rms.mean for p in policies]).astype(np.float64)
        self.std = np.sqrt(np.stack([p.obs_rms.var for p in policies]) + 1e-8)
        self.normalize = np.array([p.normalize_obs for p in policies])
        self.deterministic = torch.tensor([p.deterministic for p in policies])
        self.generator = torch.Generator().manual_seed(seed)

    @torch.no_grad()
    def logits(self, obs: Array, members: Array) -> torch.Tensor:
        """Logits ``[R, num_actions]`` of each row's policy (``members[r]`` in ``0..M-1``)."""
        members = np.asarray(members, np.int64)
        x = np.asarray(obs, np.float64)
        normalized = np.clip((x - self.mean[members]) / self.std[members], -10.0, 10.0)
        x = np.where(self.normalize[members][:, None], normalized, x).astype(np.float32)
        # group the rows by policy: slot[r] = position of row r inside its policy's group
        order = np.argsort(members, kind="stable")
        counts = np.bincount(members, minlength=self.count)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        slot = np.empty_like(members)
        slot[order] = np.arange(members.size) - starts[members[order]]
        h = torch.zeros((self.count, int(counts.max()), x.shape[1]), dtype=torch.float32)
        rows_m, rows_s = torch.as_tensor(members), torch.as_tensor(slot)
        h[rows_m, rows_s] = torch.as_tensor(x)
        for i, (weight, bias) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = torch.baddbmm(bias, h, weight)
            if i < len(self.weights) - 1:
                h = torch.relu(h)
        return h[rows_m, rows_s]

    @torch.no_grad()
    def act(self, obs: Array, members: Array) -> Array:
        """An action index per row of ``obs``, chosen by ``members[r]``'s policy."""
        logits = self.logits(obs, members)
        best = logits.argmax(-1)
        sampled = torch.multinomial(torch.softmax(logits, -1), 1, generator=self.generator).squeeze(-1)
        chosen: Array = torch.where(self.deterministic[torch.as_tensor(members)], best, sampled).numpy()
        return chosen
