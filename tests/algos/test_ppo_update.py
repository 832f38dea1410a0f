"""ppo_update learns a contextual bandit; target_kl stops the epochs early."""

from __future__ import annotations

import pytest
import torch

from speedflip.algos.ppo import Batch, ppo_update
from speedflip.config import PPOConfig
from speedflip.models.mlp import ActorCritic

CONTEXTS = 4  # observation = one-hot context; the right action is (context + 1) % 4


def _correct(context: torch.Tensor) -> torch.Tensor:
    return (context + 1) % CONTEXTS


@torch.no_grad()
def _collect(model: ActorCritic, n: int, g: torch.Generator) -> Batch:
    context = torch.randint(0, CONTEXTS, (n,), generator=g)
    obs = torch.nn.functional.one_hot(context, CONTEXTS).float()
    actions, log_probs, values = model.act(obs)
    rewards = (actions == _correct(context)).float()
    # one-step episodes: return = reward, advantage = reward - V(s)
    return Batch(obs, actions, log_probs, values, rewards - values, rewards)


@torch.no_grad()
def _prob_correct(model: ActorCritic) -> float:
    context = torch.arange(CONTEXTS)
    probs = torch.softmax(model.policy(torch.eye(CONTEXTS)), dim=-1)
    return float(probs[context, _correct(context)].mean())


def test_ppo_update_learns_contextual_bandit() -> None:
    torch.manual_seed(0)
    model = ActorCritic(CONTEXTS, CONTEXTS, [16], [16])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, eps=1e-5)
    cfg = PPOConfig(minibatch_size=64, update_epochs=4, ent_coef=0.0)
    g = torch.Generator().manual_seed(1)
    start = _prob_correct(model)
    assert start == pytest.approx(0.25, abs=0.05)  # the 0.01-gain policy head starts near uniform

    for _ in range(15):
        metrics = ppo_update(model, optimizer, _collect(model, 256, g), cfg, g)

    assert _prob_correct(model) > 0.9  # reaches ~0.98 with these settings
    # mean reward of the sampled actions rose accordingly
    assert float(_collect(model, 1024, g).returns.mean()) > 0.8
    assert metrics["minibatch_updates"] == 4 * (256 // 64)
    assert metrics["stopped_early"] == 0.0
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm",
                "explained_variance"):  # fmt: skip
        assert key in metrics and isinstance(metrics[key], float)


def test_ppo_update_critic_learns_values() -> None:
    # Fixed bandit with the policy frozen at its start: the critic must fit E[reward | context] = 0.25.
    torch.manual_seed(0)
    model = ActorCritic(CONTEXTS, CONTEXTS, [16], [16])
    optimizer = torch.optim.Adam(model.critic.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(2)
    batch = _collect(model, 512, g)
    cfg = PPOConfig(minibatch_size=128, update_epochs=30, norm_adv=False, ent_coef=0.0)
    before = float(((model.value(batch.obs) - batch.returns) ** 2).mean().detach())
    ppo_update(model, optimizer, batch, cfg, g)
    after = float(((model.value(batch.obs) - batch.returns) ** 2).mean().detach())
    assert after < before * 0.5


def test_target_kl_stops_after_first_epoch() -> None:
    torch.manual_seed(0)
    model = ActorCritic(CONTEXTS, CONTEXTS, [16], [16])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(3)
    batch = _collect(model, 128, g)
    cfg = PPOConfig(minibatch_size=32, update_epochs=10, target_kl=1e-9)
    metrics = ppo_update(model, optimizer, batch, cfg, g)
    assert metrics["stopped_early"] == 1.0
    assert metrics["minibatch_updates"] == 128 // 32  # only the first epoch ran


def test_without_target_kl_all_epochs_run_and_partial_minibatch_is_dropped() -> None:
    torch.manual_seed(0)
    model = ActorCritic(CONTEXTS, CONTEXTS, [16], [16])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(4)
    batch = _collect(model, 100, g)  # 100 rows / 32 -> 3 full minibatches per epoch, 4 rows unused
    metrics = ppo_update(model, optimizer, batch, PPOConfig(minibatch_size=32, update_epochs=5), g)
    assert metrics["stopped_early"] == 0.0
    assert metrics["minibatch_updates"] == 5 * 3


def test_ppo_update_is_deterministic_given_generator() -> None:
    def run() -> list[torch.Tensor]:
        torch.manual_seed(0)
        model = ActorCritic(CONTEXTS, CONTEXTS, [16], [16])
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(5)
        batch = _collect(model, 64, g)
        ppo_update(model, optimizer, batch, PPOConfig(minibatch_size=16, update_epochs=2), g)
        return [p.detach().clone() for p in model.parameters()]

    for a, b in zip(run(), run(), strict=True):
        assert torch.equal(a, b)
