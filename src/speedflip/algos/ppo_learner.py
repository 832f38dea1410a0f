"""The PPO learner (feed-forward and recurrent): network, optimizer, normalizers and numerical guards.

It knows nothing of environments, run directories or processes. One iteration, as the run loop does it::

    weights = learner.policy_weights()          # what a collector acts with (a copy, with a version)
    rollout = collector.collect(weights)        # speedflip.rollout.Rollout, from any backend
    batch = learner.prepare(rollout)            # reward scaling + GAE (pure functions) -> tensors
    stats = learner.update(batch, rollout.raw_obs)

The update itself is :func:`speedflip.algos.ppo.ppo_update` (or the recurrent one), top to bottom.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from speedflip._types import Array
from speedflip.accel import compile_networks, make_gradient_step, resolve_update_precision
from speedflip.algos.guards import UpdateGuard, nonfinite_fields, weights_finite
from speedflip.algos.normalize import ReturnNormalizer, RunningMeanStd
from speedflip.algos.ppo import Batch, compute_gae, mirror_batch, ppo_update
from speedflip.algos.ppo_recurrent import SequenceRollout, recurrent_ppo_update
from speedflip.config import Config
from speedflip.models.build import PolicyModel, make_adam
from speedflip.models.mlp import ActorCritic
from speedflip.models.recurrent import RecurrentActorCritic
from speedflip.rollout import Mirror, PolicyWeights, Rollout
from speedflip.schedule import adapt_learning_rate

PPOBatch = Batch | SequenceRollout


def scale_rewards(norm: ReturnNormalizer, rewards: Array, done: Array) -> Array:
    """Rewards ``[T, N]`` divided by the running std of the discounted return, step by step."""
    if norm.returns.shape != rewards.shape[1:]:  # other rows (a new curriculum stage): returns restart
        norm.returns = np.zeros(rewards.shape[1:], np.float64)
    return np.stack([norm(rewards[t], done[t]) for t in range(rewards.shape[0])])


@dataclass
class LearnerState:
    """Everything a learner owns, as tensors and JSON-safe values (see :mod:`speedflip.checkpoint`)."""

    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any]  # torch optimizer state dict
    tensors: dict[str, torch.Tensor]  # normalizers and RNG states
    meta: dict[str, Any]


class PPOLearner:
    """PPO on :class:`~speedflip.models.mlp.ActorCritic` or recurrent PPO on a
    :class:`~speedflip.models.recurrent.RecurrentActorCritic` (``cfg.algo == "ppo_recurrent"``)."""

    def __init__(
        self, cfg: Config, model: PolicyModel, device: torch.device, obs_dim: int, mirror: Mirror | None = None
    ) -> None:
        """``mirror``: the game's symmetry, for ``ppo.mirror_augment`` and ``ppo.mirror_coef`` (required then; the
        trainer builds it)."""
        if cfg.ppo.uses_mirror and mirror is None:
            raise ValueError(
                "ppo.mirror_augment / ppo.mirror_coef need the environment's mirror (speedflip.env.mirror)"
            )
        self.cfg = cfg
        self.mirror = mirror if cfg.ppo.uses_mirror else None
        self.ppo = cfg.ppo  # the settings the schedule may change (learning rate, entropy)
        self.device = device
        self.model = model.to(device)
        self.optimizer = make_adam(self.model, cfg.ppo.learning_rate, eps=1e-5)
        # auto: bfloat16 where it was measured to pay, the feed-forward Rocket League networks (docs/performance.md)
        rocket_league_mlp = isinstance(self.model, ActorCritic) and cfg.gym.env_id is None
        self.precision = resolve_update_precision(cfg.run.update_precision, device, rocket_league_mlp)
        self.gradient_step = make_gradient_step(device, cfg.run.amp, self.precision)
        self.notes: list[str] = list(self.gradient_step.notes)
        if cfg.run.compile and isinstance(self.model, ActorCritic):
            example = torch.zeros(8, obs_dim, device=device)
            nets: dict[str, torch.nn.Module] = {"policy": self.model.policy, "critic": self.model.critic}
            self.model.compiled.update(compile_networks(nets, example, self.notes))
        elif cfg.run.compile:
            self.notes.append("torch.compile: not applied to the recurrent model (LSTM/GRU core); running eagerly")
        self.generator = torch.Generator().manual_seed(cfg.run.seed + 1)
        self.obs_rms = RunningMeanStd((obs_dim,))
        self.return_norm = ReturnNormalizer(0, cfg.ppo.gamma)
        self.guard = UpdateGuard(self.model, self.optimizer, cfg.run.max_nonfinite_updates,
                                 cfg.run.max_nonfinite_restores)  # fmt: skip
        self.version = 0  # updates done (the iteration counter)
        self.learning_rate = cfg.ppo.learning_rate
        # ppo.release_kl_coef: a frozen copy of the policy as it was when the kickstart was released
        self.release_anchor: ActorCritic | None = None

    @property
    def recurrent(self) -> bool:
        return isinstance(self.model, RecurrentActorCritic)

    # ------------------------------------------------------------------ acting side
    def policy_weights(self) -> PolicyWeights:
        """A CPU copy of the network and the observation statistics, tagged with :attr:`version`."""
        model = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
        rms = self.obs_rms.state_dict() if self.cfg.ppo.normalize_obs else None
        return PolicyWeights(self.version, model, rms)

    def set_hyperparameters(self, learning_rate: float, ent_coef: float, kickstart_coef: float = 0.0) -> None:
        """What the schedule decided for the next update (``kickstart_coef``: the rule-bot cross-entropy's weight)."""
        self.learning_rate = learning_rate
        if ent_coef != self.ppo.ent_coef or kickstart_coef != self.ppo.kickstart_coef:
            self.ppo = self.ppo.model_copy(update={"ent_coef": ent_coef, "kickstart_coef": kickstart_coef})

    def freeze_release_anchor(self) -> None:
        """Keep a frozen copy of the policy as it is now (``ppo.release_kl_coef``: the KL term's reference)."""
        assert isinstance(self.model, ActorCritic), "the release KL is for feed-forward PPO (config-checked)"
        compiled, self.model.compiled = self.model.compiled, {}  # the copy runs eagerly, on its own weights
        try:
            anchor = copy.deepcopy(self.model)
        finally:
            self.model.compiled = compiled
        anchor.requires_grad_(False)
        self.release_anchor = anchor.eval()

    # ------------------------------------------------------------------ learning side
    def prepare(self, rollout: Rollout) -> PPOBatch:
        """Scale the rewards, compute GAE (with truncation bootstraps) and lay the rollout out as tensors."""
        ppo = self.cfg.ppo
        done = rollout.terminated | rollout.truncated
        rewards = scale_rewards(self.return_norm, rollout.rewards, done) if ppo.normalize_rewards else rollout.rewards
        # ppo.bootstrap_through_goals: a goal is play going on, so GAE runs on into the kickoff that follows (its
        # observation is the next row's) instead of stopping. Rocket League terminates on goals only (and on the
        # rare quarantined non-finite state, which restarts the same way); other envs are refused by the config
        terminated = np.zeros_like(rollout.terminated) if ppo.bootstrap_through_goals else rollout.terminated
        advantages, returns = compute_gae(
            rewards, rollout.values, terminated, rollout.truncated, rollout.truncation_values,
            rollout.last_values, ppo.gamma, ppo.gae_lambda,
        )  # fmt: skip
        tensor = self._tensor
        if self.recurrent:
            assert rollout.starts is not None and rollout.states is not None
            return SequenceRollout(
                obs=tensor(rollout.obs), actions=tensor(rollout.actions), log_probs=tensor(rollout.log_probs),
                values=tensor(rollout.values), advantages=tensor(advantages), returns=tensor(returns),
                starts=tensor(rollout.starts), states=rollout.states.to(self.device),
            )  # fmt: skip
        T, N = rollout.num_steps, rollout.num_rows
        obs = tensor(rollout.obs.reshape(T * N, -1))
        batch = Batch(
            obs=obs,
            actions=tensor(rollout.actions.reshape(T * N, *rollout.actions.shape[2:])),
            masks=None if rollout.masks is None else tensor(rollout.masks.reshape(T * N, -1)),
            log_probs=tensor(rollout.log_probs.reshape(-1)),
            values=tensor(rollout.values.reshape(-1)),
            advantages=tensor(advantages.reshape(-1)),
            returns=tensor(returns.reshape(-1)),
            teacher_actions=None if rollout.teacher_actions is None else tensor(rollout.teacher_actions.reshape(-1)),
        )
        if self.mirror is not None and ppo.mirror_augment != "none":  # the rows' left-right mirrors
            batch = mirror_batch(batch, self.mirror, ppo.mirror_augment, self.generator)
        if self.mirror is not None and ppo.mirror_coef > 0:  # the symmetry loss
            batch.mirror = self.mirror
        if self.release_anchor is not None:
            batch.anchor_logits = self.release_anchor.anchor_logits(batch.obs)
        return batch

    def update(self, batch: PPOBatch, raw_obs: Array | None = None, where: str = "") -> dict[str, float]:
        """One guarded PPO update; then fold the rollout's raw observations into the normalizer.

        A batch holding NaN/Inf is not trained on; see :mod:`speedflip.algos.guards` for what follows
        repeated bad updates. ``where`` names the point of training in a divergence message.
        """
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate
        start = time.perf_counter()
        bad_inputs = nonfinite_fields({"obs": batch.obs, "log_probs": batch.log_probs, "values": batch.values,
                                       "advantages": batch.advantages, "returns": batch.returns})  # fmt: skip
        reason = None
        if bad_inputs:
            metrics: dict[str, float] = {"nonfinite_minibatches": float("nan")}
            reason = f"the rollout itself holds NaN/Inf in {', '.join(bad_inputs)}"
        else:
            metrics = self._ppo_update(batch)
            if metrics["nonfinite_minibatches"] > 0:
                reason = f"NaN/Inf loss or gradients in {metrics['nonfinite_minibatches']:.0f} minibatches"
        poisoned = not weights_finite(self.model)
        if poisoned and not bad_inputs:
            reason = "the weights became NaN/Inf"
        self.guard.after_update(reason, poisoned, where or f"update {self.version}")
        if reason is None and raw_obs is not None and self.cfg.ppo.normalize_obs:
            rows = raw_obs.reshape(-1, raw_obs.shape[-1])
            if self.mirror is not None:  # mirror-symmetric statistics: mirroring a normalized row stays exact
                rows = np.concatenate([rows, self.mirror.obs(rows)])
            self.obs_rms.update(rows)
        self.version += 1
        metrics["learning_rate"] = self.learning_rate  # the rate this update used
        if reason is None:  # ppo.lr_target_kl: the next update's rate follows this one's KL
            self.learning_rate = adapt_learning_rate(self.ppo, self.learning_rate, metrics.get("approx_kl", math.nan))
        metrics["update_seconds"] = time.perf_counter() - start
        return metrics

    def _ppo_update(self, batch: PPOBatch) -> dict[str, float]:
        if isinstance(batch, SequenceRollout):
            assert isinstance(self.model, RecurrentActorCritic)
            length = self.cfg.recurrent.sequence_length
            return recurrent_ppo_update(
                self.model, self.optimizer, batch, self.ppo, length, self.generator, self.gradient_step
            )
        assert isinstance(self.model, ActorCritic)
        return ppo_update(self.model, self.optimizer, batch, self.ppo, self.generator, self.gradient_step)

    def _tensor(self, array: Array) -> torch.Tensor:
        """``array`` on the training device; on CUDA through pinned memory (an asynchronous copy)."""
        if self.device.type != "cuda":
            return torch.as_tensor(array, device=self.device)
        return torch.from_numpy(np.ascontiguousarray(array)).pin_memory().to(self.device, non_blocking=True)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> LearnerState:
        tensors = {
            **{f"obs_rms.{k}": torch.from_numpy(np.asarray(v)) for k, v in self.obs_rms.state_dict().items()},
            **{f"ret_rms.{k}": torch.from_numpy(np.asarray(v)) for k, v in self.return_norm.rms.state_dict().items()},
            "ret.returns": torch.from_numpy(self.return_norm.returns.copy()),
            "rng.torch": torch.get_rng_state(),
            "rng.generator": self.generator.get_state(),
        }
        if self.release_anchor is not None:
            anchor = self.release_anchor.state_dict().items()
            tensors.update({f"release_anchor.{k}": v.detach().cpu().contiguous() for k, v in anchor})
        model = {k: v.detach().cpu().contiguous() for k, v in self.model.state_dict().items()}
        meta = {"iteration": self.version, "learning_rate": self.learning_rate}
        return LearnerState(model, self.optimizer.state_dict(), tensors, meta)

    def load_state_dict(self, state: LearnerState) -> None:
        t = state.tensors
        self.model.load_state_dict({k: v.to(self.device) for k, v in state.model.items()})
        self.optimizer.load_state_dict(state.optimizer)
        self.obs_rms.load_state_dict({k: t[f"obs_rms.{k}"].numpy() for k in ("mean", "var", "count")})
        self._symmetrize_obs_statistics()
        self.return_norm.rms.load_state_dict({k: t[f"ret_rms.{k}"].numpy() for k in ("mean", "var", "count")})
        if "ret.returns" in t:
            self.return_norm.returns = t["ret.returns"].numpy().astype(np.float64).copy()
        torch.set_rng_state(t["rng.torch"])
        self.generator.set_state(t["rng.generator"])
        self._load_release_anchor(t)
        self.version = int(state.meta["iteration"])
        if self.cfg.ppo.lr_target_kl is not None and "learning_rate" in state.meta:  # the adapted rate goes on
            self.learning_rate = float(state.meta["learning_rate"])
        self.guard.snapshot()

    def load_policy(self, state: LearnerState, keep_optimizer: bool = False) -> None:
        """A warm start from another run's state: the network and the observation normalizer; with
        ``keep_optimizer`` also Adam's moments and the update counter. The reward scaling starts afresh
        (the new run's rewards may differ) and so do the RNGs (the new run's seed)."""
        t = state.tensors
        self.model.load_state_dict({k: v.to(self.device) for k, v in state.model.items()})
        self.obs_rms.load_state_dict({k: t[f"obs_rms.{k}"].numpy() for k in ("mean", "var", "count")})
        self._symmetrize_obs_statistics()
        if keep_optimizer:
            self.optimizer.load_state_dict(state.optimizer)
            self.version = int(state.meta.get("iteration", 0))
            self._load_release_anchor(t)  # the schedule goes on, so does the KL toward the same released policy
        self.guard.snapshot()

    def _symmetrize_obs_statistics(self) -> None:
        """With a mirror (``ppo.mirror_augment``, ``ppo.mirror_coef``): make loaded observation statistics those
        of the observations and their mirrors together (exact for the mixture), so that mirroring a normalized row
        stays exact."""
        if self.mirror is None:
            return
        rms, index, sign = self.obs_rms, self.mirror.obs_index, self.mirror.obs_sign.astype(np.float64)
        mirrored_mean = rms.mean[index] * sign
        mean = (rms.mean + mirrored_mean) / 2
        rms.var = (rms.var + rms.var[index]) / 2 + ((rms.mean - mirrored_mean) / 2) ** 2
        rms.mean = mean

    def _load_release_anchor(self, tensors: dict[str, torch.Tensor]) -> None:
        """The frozen released policy (``ppo.release_kl_coef``) from a state's tensors, when it has one."""
        prefix = "release_anchor."
        anchor = {k.removeprefix(prefix): v.to(self.device) for k, v in tensors.items() if k.startswith(prefix)}
        if anchor:
            self.freeze_release_anchor()
            assert self.release_anchor is not None
            self.release_anchor.load_state_dict(anchor)


def load_weights(model: torch.nn.Module, rms: RunningMeanStd | None, weights: PolicyWeights) -> None:
    """Put ``weights`` into an acting copy (a collector's network and observation statistics); any network
    whose state dict the weights hold (actor-critics, DQN's Q-network)."""
    device = next(model.parameters()).device
    model.load_state_dict({k: v.to(device) for k, v in weights.model.items()})
    if rms is not None and weights.obs_rms is not None:
        rms.load_state_dict(weights.obs_rms)
