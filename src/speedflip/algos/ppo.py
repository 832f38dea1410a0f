"""PPO, top to bottom: GAE, then clipped-surrogate updates over minibatches and epochs.

Shapes: ``T`` steps per rollout, ``N`` agents. A *terminated* step (a goal) has no future value; a
*truncated* step (a time limit) bootstraps from the value of the episode's final observation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from speedflip._types import Array
from speedflip.config import PPOConfig
from speedflip.models.mlp import ActorCritic


def compute_gae(
    rewards: Array,
    values: Array,
    terminated: Array,
    truncated: Array,
    truncation_values: Array,
    last_values: Array,
    gamma: float,
    gae_lambda: float,
) -> tuple[Array, Array]:
    """Generalised advantage estimation over ``[T, N]`` arrays; returns ``(advantages, returns)``.

    - ``values[t]``: V(s_t) for the observation acted on at step t;
    - ``truncation_values[t]``: V(final observation) where step t was truncated (ignored elsewhere);
    - ``last_values``: V(s_T), the observation after the rollout's last step.
    """
    T = rewards.shape[0]
    advantages = np.zeros_like(rewards, dtype=np.float32)
    last_gae = np.zeros(rewards.shape[1], np.float32)
    for t in reversed(range(T)):
        following = last_values if t == T - 1 else values[t + 1]
        next_value = np.where(terminated[t], 0.0, np.where(truncated[t], truncation_values[t], following))
        episode_goes_on = 1.0 - (terminated[t] | truncated[t]).astype(np.float32)
        delta = rewards[t] + gamma * next_value - values[t]
        last_gae = delta + gamma * gae_lambda * episode_goes_on * last_gae
        advantages[t] = last_gae
    return advantages, (advantages + values).astype(np.float32)


@dataclass
class Batch:
    """A flattened rollout: one row per (step, agent)."""

    obs: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    masks: torch.Tensor | None = None  # [B, A] bool action masks (table form with masking)

    def __len__(self) -> int:
        return int(self.actions.shape[0])


def ppo_losses(
    model: ActorCritic, batch: Batch, idx: torch.Tensor, cfg: PPOConfig
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The PPO loss on the rows ``idx`` of ``batch`` and its parts (for logging and tests)."""
    if batch.masks is None:
        new_log_probs, entropy, new_values = model.evaluate(batch.obs[idx], batch.actions[idx])
    else:
        new_log_probs, entropy, new_values = model.evaluate(batch.obs[idx], batch.actions[idx], batch.masks[idx])
    log_ratio = new_log_probs - batch.log_probs[idx]
    ratio = log_ratio.exp()
    advantages = batch.advantages[idx]
    if cfg.norm_adv and advantages.numel() > 1:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)

    policy_loss = torch.max(
        -advantages * ratio, -advantages * torch.clamp(ratio, 1 - cfg.clip_coef, 1 + cfg.clip_coef)
    ).mean()

    returns = batch.returns[idx]
    if cfg.clip_vloss:
        old_values = batch.values[idx]
        clipped = old_values + torch.clamp(new_values - old_values, -cfg.clip_coef, cfg.clip_coef)
        value_loss = 0.5 * torch.max((new_values - returns) ** 2, (clipped - returns) ** 2).mean()
    else:
        value_loss = 0.5 * ((new_values - returns) ** 2).mean()

    entropy_mean = entropy.mean()
    loss = policy_loss - cfg.ent_coef * entropy_mean + cfg.vf_coef * value_loss
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clip_fraction = ((ratio - 1.0).abs() > cfg.clip_coef).float().mean()
    parts = {
        "policy_loss": policy_loss.detach(),
        "value_loss": value_loss.detach(),
        "entropy": entropy_mean.detach(),
        "approx_kl": approx_kl,
        "clip_fraction": clip_fraction,
    }
    return loss, parts


def ppo_update(
    model: ActorCritic,
    optimizer: torch.optim.Optimizer,
    batch: Batch,
    cfg: PPOConfig,
    generator: torch.Generator,
) -> dict[str, float]:
    """``update_epochs`` passes of shuffled minibatches over ``batch``; returns mean metrics."""
    totals: dict[str, float] = {}
    updates = 0
    stopped_early = 0.0
    n = len(batch)
    for _ in range(cfg.update_epochs):
        order = torch.randperm(n, generator=generator, device="cpu").to(batch.obs.device)
        epoch_kl = []
        for start in range(0, n - cfg.minibatch_size + 1, cfg.minibatch_size):
            idx = order[start : start + cfg.minibatch_size]
            loss, parts = ppo_losses(model, batch, idx, cfg)
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
    y_pred, y_true = batch.values.cpu().numpy(), batch.returns.cpu().numpy()
    var_y = float(np.var(y_true))
    metrics["explained_variance"] = float("nan") if var_y == 0 else 1.0 - float(np.var(y_true - y_pred)) / var_y
    metrics["minibatch_updates"] = float(updates)
    metrics["stopped_early"] = stopped_early
    return metrics
