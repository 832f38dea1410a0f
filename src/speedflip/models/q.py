"""Q-networks for DQN: an MLP from observation to one value per discrete action."""

from __future__ import annotations

import torch
from torch import nn

from speedflip.models.mlp import forward_float32_output, mlp


class QNetwork(nn.Module):
    """``Q(s, ·)``: an MLP with ReLU hidden layers and a linear head of ``num_actions`` values."""

    def __init__(self, obs_dim: int, num_actions: int, layers: list[int]) -> None:
        super().__init__()
        self.obs_dim = obs_dim
        self.num_actions = num_actions
        self.net = mlp(obs_dim, layers, num_actions, out_gain=1.0)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``[B, obs_dim]`` -> ``[B, num_actions]`` action values."""
        return forward_float32_output(self.net, obs)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
