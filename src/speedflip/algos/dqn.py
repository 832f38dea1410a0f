"""DQN, top to bottom: replay buffer, epsilon schedule, TD targets, one gradient step, target update.

Read in the order the training loop uses it (see :class:`speedflip.algos.dqn_learner.DQNLearner`):

1. act epsilon-greedily with :func:`epsilon_at` (linear decay from ``start_epsilon`` to
   ``end_epsilon`` over ``exploration_fraction`` of the run);
2. store ``(obs, action, reward, next_obs, terminated)`` in the :class:`ReplayBuffer`;
   ``next_obs`` is the *final* observation of an episode that just ended (not the reset one), and
   only ``terminated`` stops bootstrapping: a time-limit truncation still bootstraps;
3. after ``learning_starts`` steps, every ``train_frequency`` steps do ``gradient_steps`` of
   :func:`dqn_update` on uniformly sampled minibatches;
4. every ``target_update_interval`` steps :func:`update_target` (``tau = 1``: hard copy,
   ``tau < 1``: Polyak averaging).

The optimizer step of :func:`dqn_update` is a :class:`speedflip.accel.GradientStep` (AMP on CUDA
with ``run.amp``); a step whose loss or gradients are NaN/Inf is skipped, leaving the weights as
they were, and reported as ``nonfinite_steps = 1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from speedflip._types import Array
from speedflip.accel import GradientStep
from speedflip.config import DQNConfig


# ---------------------------------------------------------------------- 1. exploration
def linear_schedule(start: float, end: float, duration: float, t: float) -> float:
    """``start`` at ``t = 0``, ``end`` from ``t = duration`` on, a straight line in between."""
    if duration <= 0:
        return end
    slope = (end - start) / duration
    return max(slope * t + start, end) if end <= start else min(slope * t + start, end)


def epsilon_at(step: int, cfg: DQNConfig, total_steps: int) -> float:
    """Epsilon after ``step`` agent steps: ``start_epsilon`` -> ``end_epsilon`` over ``exploration_fraction``."""
    return linear_schedule(cfg.start_epsilon, cfg.end_epsilon, cfg.exploration_fraction * total_steps, step)


def epsilon_greedy(q_values: torch.Tensor, epsilon: float, rng: np.random.Generator) -> Array:
    """Greedy actions from ``q_values [B, A]``, each replaced by a uniform random one with probability ``epsilon``."""
    greedy: Array = q_values.argmax(dim=1).cpu().numpy()
    explore = rng.random(greedy.shape[0]) < epsilon
    random_actions = rng.integers(0, q_values.shape[1], size=greedy.shape[0])
    out: Array = np.where(explore, random_actions, greedy)
    return out


# ---------------------------------------------------------------------- 2. replay buffer
@dataclass
class ReplaySample:
    """A minibatch of transitions as tensors."""

    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    next_obs: torch.Tensor
    terminated: torch.Tensor


class ReplayBuffer:
    """A ring buffer of transitions, preallocated as numpy arrays.

    ``pos`` is the row the next transition goes to; once ``capacity`` rows are written ``full`` is
    set and the oldest rows are overwritten first. Its state (arrays, ``pos``, ``full``) goes into
    checkpoints as plain tensors.
    """

    def __init__(self, capacity: int, obs_dim: int) -> None:
        self.capacity = capacity
        self.obs_dim = obs_dim
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.actions = np.zeros(capacity, np.int64)
        self.rewards = np.zeros(capacity, np.float32)
        self.terminated = np.zeros(capacity, np.float32)
        self.pos = 0
        self.full = False

    def __len__(self) -> int:
        return self.capacity if self.full else self.pos

    def add(self, obs: Array, actions: Array, rewards: Array, next_obs: Array, terminated: Array) -> None:
        """Append a batch of transitions (one per env), wrapping around at ``capacity``."""
        n = int(np.asarray(actions).shape[0])
        rows = (self.pos + np.arange(n)) % self.capacity
        self.obs[rows] = obs
        self.actions[rows] = actions
        self.rewards[rows] = rewards
        self.next_obs[rows] = next_obs
        self.terminated[rows] = terminated
        if self.pos + n >= self.capacity:
            self.full = True
        self.pos = int((self.pos + n) % self.capacity)

    def sample(self, batch_size: int, rng: np.random.Generator, device: torch.device) -> ReplaySample:
        """``batch_size`` transitions drawn uniformly (with replacement) from the filled rows."""
        if len(self) == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        rows = rng.integers(0, len(self), size=batch_size)

        def t(a: Array) -> torch.Tensor:
            return torch.as_tensor(a[rows], device=device)

        return ReplaySample(t(self.obs), t(self.actions), t(self.rewards), t(self.next_obs), t(self.terminated))

    def state_dict(self, with_contents: bool = True) -> dict[str, Array]:
        """``pos``/``full`` and (optionally) the filled rows, as numpy arrays."""
        state: dict[str, Array] = {"pos": np.array([self.pos], np.int64), "full": np.array([int(self.full)], np.int64)}
        if with_contents:
            n = len(self)
            state.update(
                obs=self.obs[:n].copy(),
                next_obs=self.next_obs[:n].copy(),
                actions=self.actions[:n].copy(),
                rewards=self.rewards[:n].copy(),
                terminated=self.terminated[:n].copy(),
            )
        return state

    def load_state_dict(self, state: dict[str, Array]) -> None:
        """Restore a :meth:`state_dict`; without contents the buffer restarts empty (position 0)."""
        if "obs" not in state:
            self.pos, self.full = 0, False
            return
        n = int(state["obs"].shape[0])
        if n > self.capacity or (n and state["obs"].shape[1] != self.obs_dim):
            raise ValueError(
                f"saved replay buffer ({n} rows of {state['obs'].shape[1:]}) does not fit this one "
                f"(capacity {self.capacity}, obs size {self.obs_dim})"
            )
        self.obs[:n] = state["obs"]
        self.next_obs[:n] = state["next_obs"]
        self.actions[:n] = state["actions"]
        self.rewards[:n] = state["rewards"]
        self.terminated[:n] = state["terminated"]
        self.pos = int(state["pos"].reshape(-1)[0]) % self.capacity
        self.full = bool(int(state["full"].reshape(-1)[0])) and n == self.capacity


# ---------------------------------------------------------------------- 3. learning
@torch.no_grad()
def td_targets(
    q_net: nn.Module, target_net: nn.Module, batch: ReplaySample, gamma: float, double: bool
) -> torch.Tensor:
    """``r + gamma * (1 - terminated) * Q_target(s', a*)``.

    Plain DQN: ``a* = argmax_a Q_target(s', a)``. Double DQN: ``a* = argmax_a Q_online(s', a)``,
    still valued by the target network (decouples choosing from valuing, less overestimation).
    """
    target_q = target_net(batch.next_obs)
    chooser = q_net(batch.next_obs) if double else target_q
    next_actions = chooser.argmax(dim=1, keepdim=True)
    next_value = target_q.gather(1, next_actions).squeeze(1)
    out: torch.Tensor = batch.rewards + gamma * (1.0 - batch.terminated) * next_value
    return out


def dqn_update(
    q_net: nn.Module,
    target_net: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: ReplaySample,
    cfg: DQNConfig,
    step: GradientStep | None = None,
) -> dict[str, float]:
    """One gradient step of the TD error (``dqn.loss``: squared or Huber) on ``batch``.

    ``q_net``/``target_net`` are :class:`~speedflip.models.q.QNetwork` s (or compiled wrappers of
    them). ``step`` does backward, clipping and the optimizer step (default: plain float32). Returns
    ``td_loss``, mean ``q_values``, ``grad_norm`` and ``nonfinite_steps`` (1.0 when the loss or the
    gradients were NaN/Inf and the step was skipped: the weights are unchanged).
    """
    step = step or GradientStep(torch.device("cpu"))
    with step.autocast():
        targets = td_targets(q_net, target_net, batch, cfg.gamma, cfg.double_dqn)
        q_taken = q_net(batch.obs).gather(1, batch.actions.unsqueeze(1)).squeeze(1)
        q_taken, targets = q_taken.float(), targets.float()
        loss = F.mse_loss(q_taken, targets) if cfg.loss == "mse" else F.smooth_l1_loss(q_taken, targets)
    result = step(loss, optimizer, q_net.parameters(), cfg.max_grad_norm)
    return {
        "td_loss": float(loss.detach()),
        "q_values": float(q_taken.detach().mean()),
        "grad_norm": result.grad_norm,
        "nonfinite_steps": 0.0 if result.applied else 1.0,
    }


# ---------------------------------------------------------------------- 4. target network
@torch.no_grad()
def update_target(q_net: nn.Module, target_net: nn.Module, tau: float) -> None:
    """``target <- tau * online + (1 - tau) * target``; ``tau = 1`` is a hard copy."""
    for online, target in zip(q_net.parameters(), target_net.parameters(), strict=True):
        if tau >= 1.0:
            target.copy_(online)
        else:
            target.mul_(1.0 - tau).add_(online, alpha=tau)
