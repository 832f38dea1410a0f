"""Acting-only policies of Gymnasium runs (evaluation and ``speedflip eval``) and their checkpoint signature.

Training goes through the same pieces as a Rocket League run: the learners in :mod:`speedflip.algos`
(:class:`~speedflip.algos.ppo_learner.PPOLearner`, :class:`~speedflip.algos.dqn_learner.DQNLearner`),
the :class:`~speedflip.collect.gym_collector.GymCollector` and the one run loop
(:mod:`speedflip.train.loop`, driven by :class:`speedflip.gym.run.GymSession`). Here is only what acts:
a policy over a network and its (frozen) observation statistics, from a live learner or a checkpoint.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch

from speedflip._types import Array
from speedflip.algos.dqn import epsilon_greedy
from speedflip.algos.normalize import RunningMeanStd
from speedflip.checkpoint import Checkpoint, to_numpy_dict
from speedflip.config import Config
from speedflip.gym.envs import SpaceInfo
from speedflip.models.build import build_policy_model, build_q_network
from speedflip.models.mlp import ActorCritic
from speedflip.models.q import QNetwork
from speedflip.models.recurrent import RecurrentActorCritic

EVAL_EPSILON = 0.05
"""DQN's exploration rate when evaluated with ``--stochastic``."""


# ---------------------------------------------------------------------- policies (acting only)
class GymPolicy(Protocol):
    """Acts on a batch of encoded observations of Gymnasium envs; ``starts`` marks the first step of an
    episode. (Rocket League match players, :class:`speedflip.selfplay.policies.Policy`, also see the
    game state and the cars' teams; a Gymnasium env has neither.)"""

    def reset(self, num_envs: int) -> None: ...

    def act(self, obs: Array, starts: Array, deterministic: bool) -> Array: ...


class FeedForwardPolicy:
    """A feed-forward actor-critic with (frozen) observation normalization."""

    def __init__(self, model: ActorCritic, obs_rms: RunningMeanStd | None, device: torch.device) -> None:
        self.model, self.obs_rms, self.device = model, obs_rms, device

    def reset(self, num_envs: int) -> None:
        return None

    @torch.no_grad()
    def act(self, obs: Array, starts: Array, deterministic: bool) -> Array:
        x = self.obs_rms.normalize(obs) if self.obs_rms is not None else obs
        actions, _, _ = self.model.act(torch.as_tensor(x, device=self.device), deterministic=deterministic)
        out: Array = actions.cpu().numpy()
        return out


class RecurrentPolicy:
    """A recurrent actor-critic carrying one state row per env, zeroed where ``starts``."""

    def __init__(self, model: RecurrentActorCritic, obs_rms: RunningMeanStd | None, device: torch.device) -> None:
        self.model, self.obs_rms, self.device = model, obs_rms, device
        self.state = model.initial_state(1, device)

    def reset(self, num_envs: int) -> None:
        self.state = self.model.initial_state(num_envs, self.device)

    @torch.no_grad()
    def act(self, obs: Array, starts: Array, deterministic: bool) -> Array:
        x = self.obs_rms.normalize(obs) if self.obs_rms is not None else obs
        actions, _, _, self.state = self.model.act(
            torch.as_tensor(x, device=self.device),
            self.state,
            torch.as_tensor(starts, device=self.device),
            deterministic=deterministic,
        )
        out: Array = actions.cpu().numpy()
        return out


class QPolicy:
    """Greedy in Q (deterministic) or epsilon-greedy with :data:`EVAL_EPSILON` (stochastic)."""

    def __init__(self, q_net: torch.nn.Module, device: torch.device, seed: int = 0) -> None:
        self.q_net, self.device = q_net, device
        self.rng = np.random.default_rng(seed)

    def reset(self, num_envs: int) -> None:
        return None

    @torch.no_grad()
    def act(self, obs: Array, starts: Array, deterministic: bool) -> Array:
        q = self.q_net(torch.as_tensor(obs, device=self.device))
        return epsilon_greedy(q, 0.0 if deterministic else EVAL_EPSILON, self.rng)


# ---------------------------------------------------------------------- from a network or a checkpoint
def build_network(cfg: Config, info: SpaceInfo) -> torch.nn.Module:
    """The network ``cfg.algo`` trains, sized for the env's spaces, with ``gym.activation`` between layers
    (through the builders every run uses: :mod:`speedflip.models.build`)."""
    if cfg.algo == "dqn":
        return build_q_network(cfg, info.obs_dim, info.num_actions, cfg.gym.activation)
    return build_policy_model(cfg, info.obs_dim, info.num_actions, activation=cfg.gym.activation)


def compat_for(cfg: Config, info: SpaceInfo) -> dict[str, Any]:
    """What must match for a checkpoint of a gym run to load into the current config."""
    network: dict[str, Any]
    if cfg.algo == "dqn":
        network = {"q_layers": list(cfg.dqn.q_layers)}
    elif cfg.algo == "ppo_recurrent":
        network = cfg.recurrent.model_dump(exclude={"sequence_length"})
    else:
        network = {"policy_layers": list(cfg.ppo.policy_layers), "critic_layers": list(cfg.ppo.critic_layers)}
    return {
        "env_id": cfg.gym.env_id,
        "algo": cfg.algo,
        "obs_dim": info.obs_dim,
        "num_actions": info.num_actions,
        "network": {**network, "activation": cfg.gym.activation},
    }


def policy_for(
    model: torch.nn.Module, obs_rms: RunningMeanStd | None, device: torch.device, seed: int = 0
) -> GymPolicy:
    """The acting policy of ``model`` (shared, not copied): Q-greedy, recurrent or feed-forward."""
    if isinstance(model, QNetwork):
        return QPolicy(model, device, seed)
    if isinstance(model, RecurrentActorCritic):
        return RecurrentPolicy(model, obs_rms, device)
    assert isinstance(model, ActorCritic)
    return FeedForwardPolicy(model, obs_rms, device)


def policy_from_checkpoint(cfg: Config, info: SpaceInfo, ckpt: Checkpoint, device: torch.device) -> GymPolicy:
    """An acting-only policy from a saved gym checkpoint."""
    model = build_network(cfg, info).to(device)
    model.load_state_dict({k: v.to(device) for k, v in ckpt.model.items()})
    model.eval()
    obs_rms: RunningMeanStd | None = None
    if cfg.algo != "dqn" and cfg.ppo.normalize_obs:
        obs_rms = RunningMeanStd((info.obs_dim,))
        obs_rms.load_state_dict(to_numpy_dict(ckpt.state_tensors, "obs_rms."))
    return policy_for(model, obs_rms, device, cfg.run.seed)
