"""A recurrent actor-critic: MLP encoder -> LSTM/GRU core -> policy and value heads.

The recurrent state is one tensor ``[num_layers, batch, state_size]`` whatever the cell: for an
LSTM ``state_size = 2 * hidden_size`` (``h`` and ``c`` side by side), for a GRU ``hidden_size``.
That keeps rollout storage, checkpoints and masking the same for both cells.

``starts[t, b]`` is true where observation ``t`` of sequence ``b`` is the first of an episode: the
state is zeroed right before that observation is processed, so no memory leaks across episodes,
inside a training sequence as well as during collection.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn
from torch.distributions import Categorical

from speedflip.models.mlp import forward_float32_output, layer_init, mlp


class RecurrentActorCritic(nn.Module):
    """Categorical policy and state value on top of a shared recurrent core."""

    def __init__(
        self,
        obs_dim: int,
        num_actions: int,
        cell: Literal["lstm", "gru"] = "lstm",
        hidden_size: int = 64,
        num_layers: int = 1,
        encoder_layers: list[int] | None = None,
        head_layers: list[int] | None = None,
    ) -> None:
        super().__init__()
        self.obs_dim = obs_dim
        self.num_actions = num_actions
        self.cell = cell
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        layers: list[nn.Module] = []
        last = obs_dim
        for width in encoder_layers if encoder_layers is not None else [64]:
            layers += [layer_init(nn.Linear(last, width)), nn.ReLU()]
            last = width
        self.encoder = nn.Sequential(*layers)
        self.core: nn.LSTM | nn.GRU = (nn.LSTM if cell == "lstm" else nn.GRU)(last, hidden_size, num_layers)
        for name, param in self.core.named_parameters():
            if "bias" in name:
                nn.init.constant_(param, 0.0)
            elif "weight" in name:
                nn.init.orthogonal_(param, 1.0)
        # heads: one linear layer each on the core's output, or MLPs of ``head_layers`` on the core's output
        # and the encoder's features side by side. The core's outputs are small (|h| ~ 0.2 at the start),
        # so a policy reading only them moves ~50x less per update than a feed-forward one (measured
        # approx_kl on Rocket League); the skip lets it learn as fast, the core adds memory.
        self.head_layers = list(head_layers or [])
        if self.head_layers:  # MLP heads over [core output, encoder features] (a skip past the core)
            width = hidden_size + last
            self.policy: nn.Module = mlp(width, self.head_layers, num_actions, out_gain=0.01)
            self.critic: nn.Module = mlp(width, self.head_layers, 1, out_gain=1.0)
        else:
            self.policy = layer_init(nn.Linear(hidden_size, num_actions), gain=0.01)
            self.critic = layer_init(nn.Linear(hidden_size, 1), gain=1.0)

    @property
    def state_size(self) -> int:
        """Width of the packed recurrent state (``2 * hidden_size`` for an LSTM)."""
        return 2 * self.hidden_size if self.cell == "lstm" else self.hidden_size

    def initial_state(self, batch: int, device: torch.device | None = None) -> torch.Tensor:
        """Zeros ``[num_layers, batch, state_size]``: the state at an episode start."""
        return torch.zeros(self.num_layers, batch, self.state_size, device=device)

    def _step(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One time step of the core: ``x [1, B, F]``, packed ``state`` -> output ``[1, B, H]``, new state."""
        if isinstance(self.core, nn.LSTM):
            h, c = state[..., : self.hidden_size], state[..., self.hidden_size :]
            out, (h, c) = self.core(x, (h.contiguous(), c.contiguous()))
            return out, torch.cat([h, c], dim=-1)
        out, h = self.core(x, state.contiguous())
        return out, h

    def forward_sequence(
        self, obs: torch.Tensor, state: torch.Tensor, starts: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run ``obs [L, B, obs_dim]`` from ``state``; returns the heads' inputs ``[L, B, H]`` (the core's
        outputs, with the encoder's features appended when ``head_layers`` are set) and the final state.

        Where ``starts[t, b]`` the state is reset to zeros before step ``t`` (episode boundary mask).
        """
        features = self.encoder(obs)
        keep = (~starts).to(features.dtype).unsqueeze(0).unsqueeze(-1)  # [1, L, B, 1]
        outputs = []
        for t in range(obs.shape[0]):
            state = state * keep[:, t]
            out, state = self._step(features[t : t + 1], state)
            outputs.append(out)
        core = torch.cat(outputs, dim=0)
        if self.head_layers:
            core = torch.cat([core, features], dim=-1)
        return core, state

    def act(
        self, obs: torch.Tensor, state: torch.Tensor, starts: torch.Tensor, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step for ``B`` envs: ``(actions, log_probs, values, new_state)``."""
        out, state = self.forward_sequence(obs.unsqueeze(0), state, starts.unsqueeze(0))
        logits = forward_float32_output(self.policy, out[0])
        dist = Categorical(logits=logits)
        actions = logits.argmax(-1) if deterministic else dist.sample()
        return actions, dist.log_prob(actions), forward_float32_output(self.critic, out[0]).squeeze(-1), state

    def value(self, obs: torch.Tensor, state: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
        """V for one step of ``B`` envs (the state is not advanced)."""
        out, _ = self.forward_sequence(obs.unsqueeze(0), state, starts.unsqueeze(0))
        return forward_float32_output(self.critic, out[0]).squeeze(-1)

    def evaluate(
        self, obs: torch.Tensor, actions: torch.Tensor, state: torch.Tensor, starts: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sequences ``obs [L, B, D]`` and ``actions [L, B]`` from ``state`` -> ``(log_probs, entropy, values)``."""
        out, _ = self.forward_sequence(obs, state, starts)
        dist = Categorical(logits=forward_float32_output(self.policy, out))
        return dist.log_prob(actions), dist.entropy(), forward_float32_output(self.critic, out).squeeze(-1)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
