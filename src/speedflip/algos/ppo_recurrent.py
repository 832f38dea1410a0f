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

import torch

from speedflip.accel import GradientStep
from speedflip.algos.ppo import Batch, explained_variance, minibatch_epochs, ppo_losses
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
    step: GradientStep | None = None,
) -> dict[str, float]:
    """``update_epochs`` passes over shuffled minibatches of whole sequences; returns mean metrics.

    A minibatch holds ``max(1, minibatch_size // sequence_length)`` sequences.
    """
    seqs = rollout.sequences(sequence_length)
    num_seqs = int(seqs.actions.shape[1])
    per_batch = min(num_seqs, max(1, cfg.minibatch_size // sequence_length))
    metrics = minibatch_epochs(
        model, optimizer, num_seqs, per_batch, lambda idx: sequence_losses(model, seqs, idx, cfg), cfg, generator, step
    )
    metrics["explained_variance"] = explained_variance(rollout.values, rollout.returns)
    return metrics
