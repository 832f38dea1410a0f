"""PPO, top to bottom: GAE, then clipped-surrogate updates over minibatches and epochs.

Shapes: ``T`` steps per rollout, ``N`` agents. A *terminated* step (a goal) has no future value; a
*truncated* step (a time limit) bootstraps from the value of the episode's final observation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from speedflip._types import Array
from speedflip.accel import GradientStep
from speedflip.config import PPOConfig
from speedflip.models.mlp import ActorCritic
from speedflip.rollout import Mirror


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
    teacher_actions: torch.Tensor | None = None  # [B] the rule bot's rows (kickstarting, ppo.kickstart_coef)
    anchor_logits: torch.Tensor | None = None  # [B, A] the released policy's logits (ppo.release_kl_coef)
    mirrored_rows: torch.Tensor | None = None  # [B] bool: rows that are mirrors (ppo.mirror_augment)
    minibatch_scale: int = 1  # rows per sample in a minibatch (2: every row and its mirror)
    mirror: Mirror | None = None  # the left-right mirror the symmetry loss uses (ppo.mirror_coef)

    def __len__(self) -> int:
        return int(self.actions.shape[0])


def mirror_batch(batch: Batch, mirror: Mirror, mode: str, generator: torch.Generator | None = None) -> Batch:
    """``batch`` with the left-right mirrors of its rows (``ppo.mirror_augment``): ``mode`` 'both' appends the
    mirror of every row; 'random' replaces each row by its mirror with probability 1/2 (``generator``).

    A mirrored row has the mirrored observation, action and teacher row and the original's value, advantage,
    return and old log-probability: the policy that "acted" in it is the mirror of the one that acted in the
    original, and gave the mirrored action the probability the original action had, so PPO's ratio
    ``pi(mirrored action | mirrored obs) / pi_old(action | obs)`` is the mirrored row's own importance ratio.
    The observations must be raw or normalized by mirror-symmetric statistics (the learner keeps them so).
    """
    if batch.masks is not None or batch.anchor_logits is not None:
        raise ValueError("mirror_batch: action masks and release anchors are not mirrored (config-checked)")
    teacher = batch.teacher_actions
    if mode == "random":
        rows = len(batch)
        flip = torch.rand(rows, generator=generator).to(batch.obs.device) < 0.5

        def pick(x: torch.Tensor, mirrored: torch.Tensor) -> torch.Tensor:
            return torch.where(flip.view(-1, *([1] * (x.dim() - 1))), mirrored, x)

        return Batch(
            obs=pick(batch.obs, mirror.obs_tensor(batch.obs)),
            actions=pick(batch.actions, mirror.actions_tensor(batch.actions)),
            log_probs=batch.log_probs, values=batch.values, advantages=batch.advantages, returns=batch.returns,
            teacher_actions=None if teacher is None else pick(teacher, mirror.actions_tensor(teacher)),
            mirrored_rows=flip,
        )  # fmt: skip
    if mode != "both":
        raise ValueError(f"mirror_batch: mode must be 'both' or 'random', got {mode!r}")

    def twice(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, x])

    return Batch(
        obs=torch.cat([batch.obs, mirror.obs_tensor(batch.obs)]),
        actions=torch.cat([batch.actions, mirror.actions_tensor(batch.actions)]),
        log_probs=twice(batch.log_probs),
        values=twice(batch.values),
        advantages=twice(batch.advantages),
        returns=twice(batch.returns),
        teacher_actions=None if teacher is None else torch.cat([teacher, mirror.actions_tensor(teacher)]),
        mirrored_rows=torch.arange(2 * len(batch), device=batch.obs.device) >= len(batch),
        minibatch_scale=2,
    )


def mirror_kl(model: ActorCritic, obs: torch.Tensor, mirror: Mirror) -> torch.Tensor:
    """The symmetry loss: mean over ``obs`` of ``KL(pi(. | s) || pi(mirror(.) | mirror(s)))``, with gradients
    through both passes (0 for a mirror-symmetric policy)."""
    log_p = torch.log_softmax(model.policy_logits(obs), dim=-1)
    index = torch.as_tensor(mirror.action_index, device=obs.device)
    log_q = torch.log_softmax(model.policy_logits(mirror.obs_tensor(obs)), dim=-1)[:, index]
    return (log_p.exp() * (log_p - log_q)).sum(-1).mean()


def ppo_losses(
    model: ActorCritic, batch: Batch, idx: torch.Tensor, cfg: PPOConfig
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The PPO loss on the rows ``idx`` of ``batch`` and its parts (for logging and tests).

    Kickstarting (``cfg.kickstart_coef > 0`` and the batch has the rule bot's rows): the loss also holds
    ``kickstart_coef * mean(-log pi(teacher action | s))``, the cross-entropy toward the rule bot's choice;
    its parts add ``kickstart_agreement``, the share of rows whose most likely action is the rule bot's.
    After the release (``cfg.release_kl_coef > 0`` and the batch has the released policy's logits): the
    loss holds ``release_kl_coef * mean(KL(released policy || policy))`` instead, logged as ``release_kl``.
    """
    teacher_log_probs = teacher_is_mode = release_kl = None
    if cfg.release_kl_coef > 0 and batch.anchor_logits is not None and batch.masks is None:
        new_log_probs, entropy, new_values, release_kl = model.evaluate_with_anchor(
            batch.obs[idx], batch.actions[idx], batch.anchor_logits[idx]
        )
    elif cfg.kickstart_coef > 0 and batch.teacher_actions is not None and batch.masks is None:
        new_log_probs, entropy, new_values, teacher_log_probs, teacher_is_mode = model.evaluate_with_teacher(
            batch.obs[idx], batch.actions[idx], batch.teacher_actions[idx]
        )
    elif batch.masks is None:
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
    kickstart_loss = None
    if teacher_log_probs is not None:
        kickstart_loss = -teacher_log_probs.mean()
        loss = loss + cfg.kickstart_coef * kickstart_loss
    if release_kl is not None:
        release_kl = release_kl.mean()
        loss = loss + cfg.release_kl_coef * release_kl
    mirror_loss = None
    if cfg.mirror_coef > 0 and batch.mirror is not None:
        mirror_loss = mirror_kl(model, batch.obs[idx], batch.mirror)
        loss = loss + cfg.mirror_coef * mirror_loss
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
    if kickstart_loss is not None and teacher_is_mode is not None:
        parts["kickstart_cross_entropy"] = kickstart_loss.detach()
        parts["kickstart_agreement"] = teacher_is_mode.float().mean()  # the rule bot's row is the most likely one
    if release_kl is not None:
        parts["release_kl"] = release_kl.detach()
    if mirror_loss is not None:
        parts["mirror_loss"] = mirror_loss.detach()
    return loss, parts


LossFn = Callable[[torch.Tensor], tuple[torch.Tensor, dict[str, torch.Tensor]]]


def minibatch_epochs(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    num_items: int,
    per_minibatch: int,
    loss_fn: LossFn,
    cfg: PPOConfig,
    generator: torch.Generator,
    step: GradientStep | None = None,
) -> dict[str, float]:
    """``update_epochs`` passes over shuffled minibatches of ``per_minibatch`` of ``num_items`` items
    (rows, or whole sequences for recurrent PPO); ``loss_fn(idx)`` gives the loss and its parts.

    A minibatch whose loss or gradients are NaN/Inf is skipped (the weights are left as they were)
    and counted in ``nonfinite_minibatches``; its parts are not averaged into the metrics.
    Stops early when an epoch's mean approximate KL exceeds ``cfg.target_kl``.
    """
    step = step or GradientStep(torch.device("cpu"))
    device = next(model.parameters()).device
    totals: dict[str, float] = {}
    updates = 0
    skipped = 0
    stopped_early = 0.0
    for _ in range(cfg.update_epochs):
        order = torch.randperm(num_items, generator=generator, device="cpu").to(device)
        epoch_kl = []
        for start in range(0, num_items - per_minibatch + 1, per_minibatch):
            with step.autocast():
                loss, parts = loss_fn(order[start : start + per_minibatch])
            result = step(loss, optimizer, model.parameters(), cfg.max_grad_norm)
            if not result.applied:
                skipped += 1
                continue
            values = {key: float(value) for key, value in parts.items()}
            values["grad_norm"] = result.grad_norm
            for key, value in values.items():
                totals[key] = totals.get(key, 0.0) + value
            epoch_kl.append(values["approx_kl"])
            updates += 1
        if cfg.target_kl is not None and epoch_kl and float(np.mean(epoch_kl)) > cfg.target_kl:
            stopped_early = 1.0
            break
    metrics = {key: value / max(updates, 1) for key, value in totals.items()}
    metrics["minibatch_updates"] = float(updates)
    metrics["nonfinite_minibatches"] = float(skipped)
    metrics["stopped_early"] = stopped_early
    return metrics


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> float:
    """``1 - Var(returns - values) / Var(returns)`` (NaN when the returns are constant)."""
    y_pred, y_true = values.float().cpu().numpy(), returns.float().cpu().numpy()
    var_y = float(np.var(y_true))
    return float("nan") if var_y == 0 else 1.0 - float(np.var(y_true - y_pred)) / var_y


def ppo_update(
    model: ActorCritic,
    optimizer: torch.optim.Optimizer,
    batch: Batch,
    cfg: PPOConfig,
    generator: torch.Generator,
    step: GradientStep | None = None,
) -> dict[str, float]:
    """``update_epochs`` passes of shuffled minibatches over ``batch``; returns mean metrics.

    A batch with every row's mirror (:func:`mirror_batch`, 'both') is shuffled as one and cut into minibatches
    of twice ``cfg.minibatch_size`` rows: as many gradient steps as without the mirror, each on twice the rows.
    A mirrored batch's metrics hold ``mirror_kl``: how far the policy is from its own mirror before the update
    (the approximate KL of PPO's ratio on up to 512 mirrored rows; 0 for a mirror-symmetric policy).
    """
    asymmetry = None
    if batch.mirrored_rows is not None:
        rows = torch.nonzero(batch.mirrored_rows).flatten()[:512]  # a diagnostic: a few rows suffice
        with torch.no_grad():
            mirrored_log_probs, _, _ = model.evaluate(batch.obs[rows], batch.actions[rows])
            log_ratio = mirrored_log_probs - batch.log_probs[rows]
            asymmetry = float(((log_ratio.exp() - 1) - log_ratio).mean())
    per_minibatch = cfg.minibatch_size * batch.minibatch_scale
    metrics = minibatch_epochs(
        model, optimizer, len(batch), per_minibatch,
        lambda idx: ppo_losses(model, batch, idx, cfg), cfg, generator, step,
    )  # fmt: skip
    metrics["explained_variance"] = explained_variance(batch.values, batch.returns)
    if asymmetry is not None:
        metrics["mirror_kl"] = asymmetry
    return metrics
