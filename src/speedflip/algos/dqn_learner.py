"""The DQN learner: Q-network, target network, Adam, replay buffer and the training schedule.

Off-policy, so it learns from transitions rather than rollouts it prepares; one iteration, as the
Gymnasium session runs it::

    weights = learner.policy_weights()                        # the Q-network (a copy, with a version)
    steps = learner.steps_until_training(num_envs)            # env steps until a training round is due
    rollout = collector.collect(weights, global_step, steps)  # epsilon-greedy, with next_obs
    metrics = learner.update(rollout)                         # store, train and update the target as due

:meth:`update` walks the rollout step by step exactly as the schedule counts agent steps: every
transition goes into the replay buffer; after ``learning_starts`` agent steps, every
``train_frequency`` agent steps it does ``gradient_steps`` steps of :func:`~speedflip.algos.dqn.dqn_update`,
and every ``target_update_interval`` agent steps it updates the target network. A collector that
collects :meth:`steps_until_training` env steps ends every rollout where training is due, so the
network that acts is never older than the one the schedule would have acted with step by step.

Gradient steps whose loss or gradients are NaN/Inf are skipped (the weights stay as they were) and
counted in :attr:`DQNLearner.nonfinite_steps`.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from speedflip.accel import compile_networks, make_gradient_step, resolve_update_precision
from speedflip.algos.dqn import ReplayBuffer, dqn_update, epsilon_at, update_target
from speedflip.algos.ppo_learner import LearnerState
from speedflip.checkpoint import from_numpy_dict, to_numpy_dict
from speedflip.config import Config
from speedflip.models.build import make_adam
from speedflip.models.q import QNetwork
from speedflip.rollout import PolicyWeights, Rollout


class DQNLearner:
    """DQN (optionally double) on a :class:`~speedflip.models.q.QNetwork`; see the module docstring."""

    def __init__(self, cfg: Config, model: QNetwork, device: torch.device, obs_dim: int) -> None:
        d = cfg.dqn
        self.cfg = cfg
        self.device = device
        self.model = model.to(device)
        self.target = copy.deepcopy(self.model)
        self.target.requires_grad_(False)
        self.optimizer = make_adam(self.model, d.learning_rate, eps=1e-8)
        precision = resolve_update_precision(cfg.run.update_precision, device, bfloat16_pays=False)
        self.gradient_step = make_gradient_step(device, cfg.run.amp, precision)
        self.notes: list[str] = list(self.gradient_step.notes)
        # The networks as called (compiled wrappers sharing the parameters with run.compile); self.model and
        # self.target stay the plain modules, so state dicts and checkpoints are the same either way.
        self.q_net: torch.nn.Module = self.model
        self.target_net: torch.nn.Module = self.target
        if cfg.run.compile:
            example = torch.zeros(d.batch_size, obs_dim, device=device)
            networks: dict[str, torch.nn.Module] = {"q": self.model, "target": self.target}
            compiled = compile_networks(networks, example, self.notes)
            self.q_net, self.target_net = compiled["q"], compiled["target"]
        self.replay = ReplayBuffer(d.buffer_size, obs_dim)
        self.rng = np.random.default_rng(cfg.run.seed + 1)  # minibatch sampling
        self.global_step = 0  # agent steps stored (the schedule's clock)
        self.since_train = 0  # agent steps since the last training round (counted after learning_starts)
        self.since_target = 0  # agent steps since the last target update (counted after learning_starts)
        self.gradient_steps_done = 0
        self.nonfinite_steps = 0  # gradient steps skipped because the loss or gradients were NaN/Inf
        self._weights: PolicyWeights | None = None

    @property
    def version(self) -> int:
        """The weights' version: gradient steps taken (the acting network changes with nothing else)."""
        return self.gradient_steps_done

    @property
    def epsilon(self) -> float:
        """The exploration rate at the current agent step."""
        return epsilon_at(self.global_step, self.cfg.dqn, self.cfg.run.total_steps)

    def num_parameters(self) -> int:
        return self.model.num_parameters()

    # ------------------------------------------------------------------ acting side
    def policy_weights(self) -> PolicyWeights:
        """A CPU copy of the Q-network, tagged with :attr:`version`; the same object until the next training
        round (so a collector can skip reloading it)."""
        if self._weights is None or self._weights.version != self.version:
            model = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
            self._weights = PolicyWeights(self.version, model, None)
        return self._weights

    def steps_until_training(self, num_envs: int) -> int:
        """Env steps of ``num_envs`` envs until the next training round is due (at least 1)."""
        d = self.cfg.dqn
        waiting = max(0, (d.learning_starts - self.global_step) // num_envs)  # steps not counted yet
        counted = max(1, -(-(d.train_frequency - self.since_train) // num_envs))
        return waiting + counted

    # ------------------------------------------------------------------ learning side
    def update(self, rollout: Rollout) -> dict[str, float]:
        """Store the rollout's transitions step by step, training and updating the target where due.

        Returns the means of ``td_loss``, ``q_values`` and ``grad_norm`` over the applied gradient steps
        (NaN when none was applied), ``applied_steps`` and ``nonfinite_steps``.
        """
        if rollout.next_obs is None:
            raise ValueError("DQN needs transitions with next_obs (collect them with algo: dqn)")
        d, N = self.cfg.dqn, rollout.num_rows
        updates: list[dict[str, float]] = []
        for t in range(rollout.num_steps):
            self.replay.add(rollout.raw_obs[t], rollout.actions[t], rollout.rewards[t], rollout.next_obs[t],
                            rollout.terminated[t])  # fmt: skip
            self.global_step += N
            if self.global_step <= d.learning_starts:
                continue
            self.since_train += N
            while self.since_train >= d.train_frequency:
                self.since_train -= d.train_frequency
                for _ in range(d.gradient_steps):
                    sample = self.replay.sample(d.batch_size, self.rng, self.device)
                    update = dqn_update(self.q_net, self.target_net, self.optimizer, sample, d, self.gradient_step)
                    self.nonfinite_steps += int(update["nonfinite_steps"])
                    self.gradient_steps_done += 1
                    updates.append(update)
            self.since_target += N
            while self.since_target >= d.target_update_interval:
                self.since_target -= d.target_update_interval
                update_target(self.model, self.target, d.tau)
        applied = [u for u in updates if not u["nonfinite_steps"]]
        metrics = {
            key: float(np.mean([u[key] for u in applied])) if applied else float("nan")
            for key in ("td_loss", "q_values", "grad_norm")
        }
        metrics["applied_steps"] = float(len(applied))
        metrics["nonfinite_steps"] = float(len(updates) - len(applied))
        return metrics

    # ------------------------------------------------------------------ state
    def state_dict(self) -> LearnerState:
        d = self.cfg.dqn
        replay = self.replay.state_dict(with_contents=d.save_replay)
        tensors = {
            **{f"target.{k}": v.detach().cpu().contiguous() for k, v in self.target.state_dict().items()},
            **from_numpy_dict(replay, "replay."),
            "rng.torch": torch.get_rng_state(),
        }
        meta = {
            "epsilon": self.epsilon,
            "replay_pos": self.replay.pos,
            "replay_size": len(self.replay),
            "replay_saved": d.save_replay,
            "since_train": self.since_train,
            "since_target": self.since_target,
            "gradient_steps": self.gradient_steps_done,
            "replay_rng": self.rng.bit_generator.state,
        }
        model = {k: v.detach().cpu().contiguous() for k, v in self.model.state_dict().items()}
        return LearnerState(model, self.optimizer.state_dict(), tensors, meta)

    def load_state_dict(self, state: LearnerState) -> None:
        """Restore a :meth:`state_dict` (``meta`` also needs ``global_step``); checkpoints of the gym learner
        before the split load too (their one ``numpy_rng`` seeds the sampling)."""
        t, meta = state.tensors, state.meta
        self.model.load_state_dict({k: v.to(self.device) for k, v in state.model.items()})
        self.optimizer.load_state_dict(state.optimizer)
        target = {k[len("target.") :]: v.to(self.device) for k, v in t.items() if k.startswith("target.")}
        self.target.load_state_dict(target)
        self.replay.load_state_dict(to_numpy_dict(t, "replay."))
        torch.set_rng_state(t["rng.torch"])
        rng_state: Any = meta.get("replay_rng", meta.get("numpy_rng"))
        if rng_state is not None:
            self.rng.bit_generator.state = rng_state
        self.global_step = int(meta["global_step"])
        self.since_train = int(meta.get("since_train", 0))
        self.since_target = int(meta.get("since_target", 0))
        self.gradient_steps_done = int(meta.get("gradient_steps", 0))
        self._weights = None

    def load_policy(self, state: LearnerState, keep_optimizer: bool = False) -> None:
        """A warm start from another run's state: the Q-network (the target network starts as its copy);
        with ``keep_optimizer`` also Adam's moments and the step and gradient-step counters (so epsilon
        continues). The replay buffer starts empty."""
        self.model.load_state_dict({k: v.to(self.device) for k, v in state.model.items()})
        self.target.load_state_dict(self.model.state_dict())
        if keep_optimizer:
            self.optimizer.load_state_dict(state.optimizer)
            self.global_step = int(state.meta.get("global_step", 0))
            self.gradient_steps_done = int(state.meta.get("gradient_steps", 0))
        self._weights = None
