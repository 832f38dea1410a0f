"""Separate policy and critic MLPs for discrete actions (feed-forward PPO)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from speedflip.models.heads import make_head


def layer_init(layer: nn.Linear, gain: float = float(np.sqrt(2)), bias: float = 0.0) -> nn.Linear:
    """Orthogonal weights, constant bias (the PPO implementation-details recipe)."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.constant_(layer.bias, bias)
    return layer


def mlp(in_dim: int, hidden: list[int], out_dim: int, out_gain: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    last = in_dim
    for width in hidden:
        layers += [layer_init(nn.Linear(last, width)), nn.ReLU()]
        last = width
    layers.append(layer_init(nn.Linear(last, out_dim), gain=out_gain))
    return nn.Sequential(*layers)


def forward_float32_output(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``net(x)`` with its last layer in float32 when a lower-precision autocast is on (``net``: an
    ``nn.Sequential`` whose last module is the output layer, or the output layer alone).

    Under bfloat16 autocast the hidden layers (where the time goes) run in bfloat16, but logits rounded
    to bfloat16 (3 significant digits) would put noise of the order of the update itself into PPO's
    probability ratios: measured on a trained 1v1 policy, an approximate KL of 1e-4 to 3.5e-4 from rounding
    alone against ~3e-3 for a whole update; with the output layer in float32, 1.2e-5. Without autocast this is
    exactly ``net(x)``.
    """
    if not torch.is_autocast_enabled(x.device.type):
        out: torch.Tensor = net(x)
        return out
    output = net
    if isinstance(net, nn.Sequential):
        *hidden, output = net
        for layer in hidden:
            x = layer(x)
    with torch.autocast(x.device.type, enabled=False):
        out = output(x.float())
    return out


class ActorCritic(nn.Module):
    """A policy MLP feeding a policy head (see :mod:`speedflip.models.heads`) and a separate critic MLP.

    ``head="categorical"`` (default): logits over the action table; ``gaussian``: 8 continuous
    controls; ``multi_discrete``: per-control bins plus buttons.
    """

    def __init__(
        self,
        obs_dim: int,
        num_actions: int,
        policy_layers: list[int],
        critic_layers: list[int],
        head: str = "categorical",
        bins: int = 5,
    ) -> None:
        super().__init__()
        self.obs_dim = obs_dim
        self.num_actions = num_actions
        self.head_kind = head
        self.head = make_head(head, num_actions, bins)
        self.policy = mlp(obs_dim, policy_layers, self.head.out_dim, out_gain=0.01)
        self.critic = mlp(obs_dim, critic_layers, 1, out_gain=1.0)
        # Callables used in place of self.policy / self.critic (torch.compile wrappers sharing their
        # parameters; see speedflip.accel.compile_networks). A plain dict: not registered as submodules,
        # so state dicts and checkpoints do not change.
        self.compiled: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {}

    def _policy(self, obs: torch.Tensor) -> torch.Tensor:
        if "policy" in self.compiled:
            return self.compiled["policy"](obs)
        return forward_float32_output(self.policy, obs)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        value = self.compiled["critic"](obs) if "critic" in self.compiled else forward_float32_output(self.critic, obs)
        return value.squeeze(-1)

    def sample(
        self, obs: torch.Tensor, deterministic: bool = False, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample actions from the policy alone (no critic pass); returns ``(actions, log_probs)``."""
        return self.head.sample_log_prob(self._policy(obs), mask, deterministic)

    def act(
        self, obs: torch.Tensor, deterministic: bool = False, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample actions; returns ``(actions, log_probs, values)``."""
        actions, log_prob = self.sample(obs, deterministic, mask)
        return actions, log_prob, self.value(obs)

    def evaluate(
        self, obs: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probabilities and entropy of ``actions`` and the values; ``(log_probs, entropy, values)``."""
        log_prob, entropy = self.head.log_prob_entropy(self._policy(obs), actions, mask)
        return log_prob, entropy, self.value(obs)

    def evaluate_with_teacher(
        self, obs: torch.Tensor, actions: torch.Tensor, teacher_actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`evaluate` plus, from the same policy pass, the log-probabilities of ``teacher_actions``
        and whether each is the policy's most likely action (what the exported bot plays);
        ``(log_probs, entropy, values, teacher_log_probs, teacher_is_mode)``."""
        params = self._policy(obs)
        log_prob, entropy = self.head.log_prob_entropy(params, actions)
        teacher_log_prob, _ = self.head.log_prob_entropy(params, teacher_actions)
        with torch.no_grad():
            teacher_is_mode = self.head.sample(params, None, deterministic=True) == teacher_actions
        return log_prob, entropy, self.value(obs), teacher_log_prob, teacher_is_mode

    def evaluate_with_anchor(
        self, obs: torch.Tensor, actions: torch.Tensor, anchor_logits: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`evaluate` plus, from the same policy pass, ``KL(anchor || policy)`` per row, where
        ``anchor_logits`` ``[B, A]`` are another categorical policy's logits on ``obs`` (the policy as it was
        when the kickstart was released); ``(log_probs, entropy, values, kl)``."""
        if self.head_kind != "categorical":
            raise ValueError(f"evaluate_with_anchor needs the categorical head (lookup table), not {self.head_kind}")
        params = self._policy(obs)
        log_prob, entropy = self.head.log_prob_entropy(params, actions)
        anchor_log_p = torch.log_softmax(anchor_logits.float(), dim=-1)
        kl = (anchor_log_p.exp() * (anchor_log_p - torch.log_softmax(params.float(), dim=-1))).sum(-1)
        return log_prob, entropy, self.value(obs), kl

    def policy_logits(self, obs: torch.Tensor) -> torch.Tensor:
        """The policy's output ``[B, A]`` on ``obs`` in float32, with gradients (the symmetry loss takes it)."""
        return self._policy(obs).float()

    def anchor_logits(self, obs: torch.Tensor) -> torch.Tensor:
        """The policy's logits ``[B, A]`` on ``obs`` without gradients (what :meth:`evaluate_with_anchor` takes)."""
        with torch.no_grad():
            return self._policy(obs).float()

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
