"""Recurrent PPO: truncated backpropagation through time over fixed-length sequences.

A rollout of ``T`` steps for ``N`` envs is cut into ``T / L`` chunks of ``L = sequence_length``
steps per env, giving ``K * N`` sequences (``K = T / L``). For each sequence the collector stored
the recurrent state the policy had right before its first step; training replays the sequence from
that state, zeroing the state wherever ``starts`` marks the first step of an episode (the episode
boundary mask), and backpropagates through at most ``L`` steps.

The advantages come from :func:`speedflip.algos.ppo.compute_gae` and the loss is exactly
:func:`speedflip.algos.ppo.ppo_losses` (one PPO implementation): only the forward pass differs.

Interface note for Rocket League (not wired there yet): the trainer would keep one state row per
learner agent (``model.initial_state(num_agents)``), pass ``starts = done at the previous step``
(true for every agent after ``env.reset()``), store the state at every ``t % L == 0`` in a
:class:`SequenceRollout`, and call :func:`recurrent_ppo_update`. Frozen recurrent opponents need
their own state rows, reset with the same ``starts`` mask.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
import torch
from torch import nn

from speedflip.algos.ppo import Batch, ppo_losses
from speedflip.config import PPOConfig
from speedflip.models.mlp import ActorCritic
from speedflip.models.recurrent import RecurrentActorCritic


@dataclass
class SequenceRollout:
    """A rollout laid out for BPTT. Shapes: ``T`` steps, ``N`` envs, ``K = T / L`` chunks.

    ``states[k]`` is the packed recurrent state ``[num_layers, N, S]`` before step ``k * L``
    (before that step's reset mask is applied).
    """

    obs: torch.Tensor  # [T, N, D]
    actions: torch.Tensor  # [T, N]
    log_probs: torch.Tensor  # [T, N]
    values: torch.Tensor  # [T, N]
    advantages: torch.Tensor  # [T, N]
    returns: torch.Tensor  # [T, N]
    starts: torch.Tensor  # [T, N] bool
    states: torch.Tensor  # [K, num_layers, N, S]

    def sequences(self, length: int) -> SequenceRollout:
        """Re-layout as ``[L, K * N, ...]`` sequences (sequence ``k * N + n`` = chunk ``k`` of env ``n``)."""
        T, N = self.actions.shape
        if T % length:
            raise ValueError(f"rollout length {T} is not a multiple of sequence_length {length}")
        K = T // length

        def seq(x: torch.Tensor) -> torch.Tensor:
            # [T, N, ...] -> [K, L, N, ...] -> [L, K, N, ...] -> [L, K * N, ...]
            y = x.reshape(K, length, N, *x.shape[2:]).transpose(0, 1)
            return y.reshape(length, K * N, *x.shape[2:])

        layers, S = self.states.shape[1], self.states.shape[3]
        states = self.states.permute(1, 0, 2, 3).reshape(layers, K * N, S)
        return SequenceRollout(
            seq(self.obs), seq(self.actions), seq(self.log_probs), seq(self.values),
            seq(self.advantages), seq(self.returns), seq(self.starts), states,
        )  # fmt: skip


class _Precomputed:
    """Stands in for the model inside :func:`ppo_losses`, returning outputs the sequence forward computed."""

    def __init__(self, log_probs: torch.Tensor, entropy: torch.Tensor, values: torch.Tensor) -> None:
        self.outputs = (log_probs, entropy, values)

    def evaluate(
        self, obs: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.outputs


def sequence_losses(
    model: RecurrentActorCritic, seqs: SequenceRollout, idx: torch.Tensor, cfg: PPOConfig
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The PPO loss over the sequences ``idx`` (columns of ``seqs``), replayed from their stored states."""
    log_probs, entropy, values = model.evaluate(
        seqs.obs[:, idx], seqs.actions[:, idx], seqs.states[:, idx], seqs.starts[:, idx]
    )
    rows = Batch(
        obs=seqs.obs[:, idx].reshape(-1, seqs.obs.shape[-1]),
        actions=seqs.actions[:, idx].reshape(-1),
        log_probs=seqs.log_probs[:, idx].reshape(-1),
        values=seqs.values[:, idx].reshape(-1),
        advantages=seqs.advantages[:, idx].reshape(-1),
        returns=seqs.returns[:, idx].reshape(-1),
    )
    stand_in = cast(ActorCritic, _Precomputed(log_probs.reshape(-1), entropy.reshape(-1), values.reshape(-1)))
    return ppo_losses(stand_in, rows, torch.arange(len(rows), device=rows.obs.device), cfg)


def recurrent_ppo_update(
    model: RecurrentActorCritic,
    optimizer: torch.optim.Optimizer,
    rollout: SequenceRollout,
    cfg: PPOConfig,
    sequence_length: int,
    generator: torch.Generator,
) -> dict[str, float]:
    """``update_epochs`` passes over shuffled minibatches of whole sequences; returns mean metrics.

    A minibatch holds ``max(1, minibatch_size // sequence_length)`` sequences.
    """
    seqs = rollout.sequences(sequence_length)
    num_seqs = int(seqs.actions.shape[1])
    per_batch = min(num_seqs, max(1, cfg.minibatch_size // sequence_length))
    totals: dict[str, float] = {}
    updates = 0
    stopped_early = 0.0
    for _ in range(cfg.update_epochs):
        order = torch.randperm(num_seqs, generator=generator, device="cpu").to(seqs.obs.device)
        epoch_kl = []
        for start in range(0, num_seqs - per_batch + 1, per_batch):
            idx = order[start : start + per_batch]
            loss, parts = sequence_losses(model, seqs, idx, cfg)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            optimizer.step()
            parts["grad_norm"] = grad_norm.detach()
            for key, value in parts.items():
                totals[key] = totals.get(key, 0.0) + float(value)
            epoch_kl.append(float(parts["approx_kl"]))
            updates += 1
        if cfg.target_kl is not None and epoch_kl and float(np.mean(epoch_kl)) > cfg.target_kl:
            stopped_early = 1.0
            break
    metrics = {key: value / max(updates, 1) for key, value in totals.items()}
    y_pred, y_true = rollout.values.cpu().numpy(), rollout.returns.cpu().numpy()
    var_y = float(np.var(y_true))
    metrics["explained_variance"] = float("nan") if var_y == 0 else 1.0 - float(np.var(y_true - y_pred)) / var_y
    metrics["minibatch_updates"] = float(updates)
    metrics["stopped_early"] = stopped_early
    return metrics
