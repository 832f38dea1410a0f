"""Build the network a config or a checkpoint's compatibility signature describes."""

from __future__ import annotations

from typing import Any

import torch

from speedflip._types import Array
from speedflip.config import Config
from speedflip.models.mlp import ActorCritic
from speedflip.models.recurrent import RecurrentActorCritic

PolicyModel = ActorCritic | RecurrentActorCritic

HEAD_FOR_FORM = {"table": "categorical", "continuous": "gaussian", "multi_discrete": "multi_discrete"}


def recurrent_spec(cfg: Config) -> dict[str, Any] | None:
    """The recurrent core of ``algo: ppo_recurrent`` as stored in checkpoints (``None`` for feed-forward)."""
    if cfg.algo != "ppo_recurrent":
        return None
    r = cfg.recurrent
    return {"cell": r.cell, "hidden_size": r.hidden_size, "num_layers": r.num_layers,
            "encoder_layers": list(r.encoder_layers), "head_layers": list(r.head_layers)}  # fmt: skip


def model_from_compat(compat: dict[str, Any], bins: int = 5) -> PolicyModel:
    """A fresh network with the shape of a checkpoint's ``compat`` signature (weights not loaded)."""
    obs_dim, num_actions = int(compat["obs_dim"]), int(compat["num_actions"])
    spec = compat.get("recurrent")
    if spec is not None:
        return RecurrentActorCritic(
            obs_dim, num_actions, spec["cell"], int(spec["hidden_size"]), int(spec["num_layers"]),
            list(spec["encoder_layers"]), list(spec.get("head_layers", [])),
        )  # fmt: skip
    head = HEAD_FOR_FORM[str(compat.get("action_form", "table"))]
    return ActorCritic(obs_dim, num_actions, list(compat["policy_layers"]), list(compat["critic_layers"]), head, bins)


class ActingMemory:
    """Action logits from a feed-forward or recurrent network, for players in matches and the pool.

    A recurrent network keeps one state row per agent across calls; :meth:`reset` marks rows whose
    episode just ended so their state is zeroed before the next observation (feed-forward: no-op).
    """

    def __init__(self, model: PolicyModel) -> None:
        self.model = model
        self.state: torch.Tensor | None = None
        self.starts: torch.Tensor | None = None

    def reset(self, rows: Array) -> None:
        """Episodes of ``rows`` (agent indices) start anew at the next call."""
        if self.starts is not None:
            self.starts[torch.as_tensor(rows, dtype=torch.long, device=self.starts.device)] = True

    @torch.no_grad()
    def logits(self, x: torch.Tensor) -> torch.Tensor:
        if isinstance(self.model, ActorCritic):
            out: torch.Tensor = self.model.policy(x)
            return out
        n = x.shape[0]
        if self.state is None or self.starts is None or self.state.shape[1] != n:
            self.state = self.model.initial_state(n, x.device)
            self.starts = torch.ones(n, dtype=torch.bool, device=x.device)
        core, self.state = self.model.forward_sequence(x.unsqueeze(0), self.state, self.starts.unsqueeze(0))
        self.starts.zero_()
        logits: torch.Tensor = self.model.policy(core[0])
        return logits
