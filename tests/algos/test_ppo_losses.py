"""ppo_losses against a plain numpy reference computation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from speedflip.algos.ppo import Batch, ppo_losses
from speedflip.config import PPOConfig
from speedflip.models.mlp import ActorCritic

OBS_DIM, NUM_ACTIONS, ROWS = 5, 4, 12


def _model_and_batch() -> tuple[ActorCritic, Batch]:
    torch.manual_seed(1234)
    model = ActorCritic(OBS_DIM, NUM_ACTIONS, [8], [8])
    # a policy far from uniform, so ratios and entropies are not trivial
    with torch.no_grad():
        model.policy[-1].weight.mul_(100.0)
    g = torch.Generator().manual_seed(99)
    obs = torch.randn(ROWS, OBS_DIM, generator=g)
    actions = torch.randint(0, NUM_ACTIONS, (ROWS,), generator=g)
    with torch.no_grad():
        current_lp, _, current_v = model.evaluate(obs, actions)
    # old policy / old values differ from the current ones by up to +-0.5
    log_probs = current_lp + (torch.rand(ROWS, generator=g) - 0.5)
    values = current_v + (torch.rand(ROWS, generator=g) - 0.5)
    advantages = torch.randn(ROWS, generator=g)
    returns = torch.randn(ROWS, generator=g)
    return model, Batch(obs, actions, log_probs, values, advantages, returns)


def _reference(model: ActorCritic, batch: Batch, idx: torch.Tensor, cfg: PPOConfig) -> dict[str, float]:
    """PPO written out in numpy (float64) from the network's raw logits and values."""
    with torch.no_grad():
        logits = model.policy(batch.obs[idx]).double().numpy()
        new_v = model.critic(batch.obs[idx]).double().numpy()[:, 0]
    i = idx.numpy()
    actions = batch.actions.numpy()[i]
    old_lp = batch.log_probs.double().numpy()[i]
    old_v = batch.values.double().numpy()[i]
    adv = batch.advantages.double().numpy()[i]
    ret = batch.returns.double().numpy()[i]

    shifted = logits - logits.max(axis=1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    new_lp = log_p[np.arange(len(i)), actions]
    entropy = -(np.exp(log_p) * log_p).sum(axis=1)

    log_ratio = new_lp - old_lp
    ratio = np.exp(log_ratio)
    if cfg.norm_adv:
        adv = (adv - adv.mean()) / (adv.std(ddof=1) + 1e-8)
    c = cfg.clip_coef
    surrogate = np.maximum(-adv * ratio, -adv * np.clip(ratio, 1 - c, 1 + c))
    policy_loss = surrogate.mean()
    unclipped = (new_v - ret) ** 2
    if cfg.clip_vloss:
        clipped_v = old_v + np.clip(new_v - old_v, -c, c)
        value_loss = 0.5 * np.maximum(unclipped, (clipped_v - ret) ** 2).mean()
    else:
        value_loss = 0.5 * unclipped.mean()
    loss = policy_loss - cfg.ent_coef * entropy.mean() + cfg.vf_coef * value_loss
    return {
        "loss": loss,
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "entropy": entropy.mean(),
        "approx_kl": ((ratio - 1) - log_ratio).mean(),
        "clip_fraction": (np.abs(ratio - 1) > c).mean(),
    }


@pytest.mark.parametrize("clip_vloss", [False, True])
@pytest.mark.parametrize("norm_adv", [False, True])
def test_ppo_losses_match_reference(clip_vloss: bool, norm_adv: bool) -> None:
    model, batch = _model_and_batch()
    cfg = PPOConfig(clip_coef=0.2, clip_vloss=clip_vloss, norm_adv=norm_adv, ent_coef=0.05, vf_coef=0.7)
    idx = torch.tensor([0, 2, 3, 5, 7, 8, 9, 11])
    ref = _reference(model, batch, idx, cfg)
    # the batch exercises both branches of every clip
    assert 0.0 < ref["clip_fraction"] < 1.0
    assert ref["approx_kl"] > 0.0

    loss, parts = ppo_losses(model, batch, idx, cfg)

    assert loss.requires_grad
    assert float(loss.detach()) == pytest.approx(ref["loss"], abs=1e-5)
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"):
        assert float(parts[key]) == pytest.approx(ref[key], abs=1e-5), key
        assert not parts[key].requires_grad, key


def test_value_clipping_changes_the_value_loss() -> None:
    """Guard that the clip_vloss parametrization above really compares two different numbers."""
    model, batch = _model_and_batch()
    idx = torch.arange(ROWS)
    plain = _reference(model, batch, idx, PPOConfig(clip_vloss=False, clip_coef=0.1))["value_loss"]
    clipped = _reference(model, batch, idx, PPOConfig(clip_vloss=True, clip_coef=0.1))["value_loss"]
    assert clipped > plain + 1e-3
    _, parts = ppo_losses(model, batch, idx, PPOConfig(clip_vloss=True, clip_coef=0.1))
    assert float(parts["value_loss"]) == pytest.approx(clipped, abs=1e-5)


def test_ratio_one_gives_minus_mean_advantage() -> None:
    # With the old log-probs equal to the current ones: ratio = 1, KL = 0, nothing clipped,
    # and without normalisation the policy loss is -mean(advantages).
    model, batch = _model_and_batch()
    with torch.no_grad():
        batch.log_probs = model.evaluate(batch.obs, batch.actions)[0].clone()
    batch.advantages = torch.tensor([1.0, -2.0, 3.0, 0.5] * 3)
    cfg = PPOConfig(norm_adv=False)
    _, parts = ppo_losses(model, batch, torch.arange(ROWS), cfg)
    assert float(parts["policy_loss"]) == pytest.approx(-0.625, abs=1e-6)  # -(1-2+3+0.5)/4
    assert float(parts["approx_kl"]) == pytest.approx(0.0, abs=1e-7)
    assert float(parts["clip_fraction"]) == 0.0


def test_loss_gradient_reaches_policy_and_critic() -> None:
    model, batch = _model_and_batch()
    loss, _ = ppo_losses(model, batch, torch.arange(ROWS), PPOConfig())
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and float(p.grad.abs().sum()) > 0, name


def test_kickstart_adds_the_cross_entropy_toward_the_teacher() -> None:
    """loss(kickstart 0.3) - loss(off) = 0.3 * mean(-log softmax(logits)[teacher action]), by hand in numpy."""
    model, batch = _model_and_batch()
    batch.teacher_actions = torch.tensor([0, 1, 2, 3] * 3)
    idx = torch.tensor([1, 2, 4, 6, 10, 11])
    with torch.no_grad():
        logits = model.policy(batch.obs[idx]).double().numpy()
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    cross_entropy = -log_p[np.arange(len(idx)), batch.teacher_actions.numpy()[idx.numpy()]].mean()

    off, off_parts = ppo_losses(model, batch, idx, PPOConfig(kickstart_coef=0.0))
    on, parts = ppo_losses(model, batch, idx, PPOConfig(kickstart_coef=0.3))

    assert "kickstart_cross_entropy" not in off_parts
    assert float(parts["kickstart_cross_entropy"]) == pytest.approx(cross_entropy, abs=1e-5)
    assert float(on.detach() - off.detach()) == pytest.approx(0.3 * cross_entropy, abs=1e-5)
    for key in ("policy_loss", "value_loss", "entropy"):  # the PPO parts are untouched
        assert float(parts[key]) == pytest.approx(float(off_parts[key]), abs=1e-6), key


def test_kickstart_agreement_is_the_share_of_rows_whose_mode_is_the_teacher_row() -> None:
    """4 of 6 rows get the policy's most likely action as the teacher's row, 2 the least likely: 4/6."""
    model, batch = _model_and_batch()
    idx = torch.tensor([0, 2, 3, 5, 7, 9])
    with torch.no_grad():
        logits = model.policy(batch.obs).numpy()
    teacher = logits.argmax(axis=1)
    teacher[[3, 7]] = logits[[3, 7]].argmin(axis=1)  # rows 3 and 7 (both in idx) disagree
    batch.teacher_actions = torch.as_tensor(teacher)
    _, parts = ppo_losses(model, batch, idx, PPOConfig(kickstart_coef=0.5))
    assert float(parts["kickstart_agreement"]) == pytest.approx(4 / 6, abs=1e-6)
    _, off_parts = ppo_losses(model, batch, idx, PPOConfig(kickstart_coef=0.0))
    assert "kickstart_agreement" not in off_parts


def test_kickstart_without_teacher_rows_is_plain_ppo() -> None:
    """A batch without the rule bot's rows (kickstarting over, or a backend without them) trains as PPO."""
    model, batch = _model_and_batch()
    idx = torch.arange(ROWS)
    plain, _ = ppo_losses(model, batch, idx, PPOConfig())
    kick, parts = ppo_losses(model, batch, idx, PPOConfig(kickstart_coef=1.0))
    assert float(kick.detach()) == pytest.approx(float(plain.detach()), abs=1e-7)
    assert "kickstart_cross_entropy" not in parts


def test_release_kl_adds_the_kl_from_the_released_policy() -> None:
    """loss(release_kl 0.4) - loss(off) = 0.4 * mean(sum p_anchor * (log p_anchor - log p)), by hand in numpy;
    the term is 0 where the policy is the released one, and replaces the kickstart term."""
    model, batch = _model_and_batch()
    g = torch.Generator().manual_seed(7)
    batch.anchor_logits = torch.randn(ROWS, NUM_ACTIONS, generator=g) * 3.0
    batch.teacher_actions = torch.zeros(ROWS, dtype=torch.int64)  # ignored once the release KL is on
    idx = torch.tensor([0, 3, 4, 8, 9, 11])
    with torch.no_grad():
        logits = model.policy(batch.obs[idx]).double().numpy()

    def log_softmax(x: np.ndarray) -> np.ndarray:
        shifted = x - x.max(axis=1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))

    anchor = log_softmax(batch.anchor_logits[idx].double().numpy())
    kl = (np.exp(anchor) * (anchor - log_softmax(logits))).sum(axis=1).mean()

    off, off_parts = ppo_losses(model, batch, idx, PPOConfig())
    on, parts = ppo_losses(model, batch, idx, PPOConfig(release_kl_coef=0.4, kickstart_coef=0.0))
    assert "release_kl" not in off_parts and "kickstart_cross_entropy" not in parts
    assert float(parts["release_kl"]) == pytest.approx(kl, abs=1e-5)
    assert float(on.detach() - off.detach()) == pytest.approx(0.4 * kl, abs=1e-5)

    with torch.no_grad():
        batch.anchor_logits = model.policy(batch.obs).float()  # the released policy is the policy itself
    _, same = ppo_losses(model, batch, idx, PPOConfig(release_kl_coef=0.4))
    assert float(same["release_kl"]) == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("ent_coef", [0.05, -0.05])
def test_entropy_coefficient_sign_sets_which_way_a_step_moves_the_entropy(ent_coef: float) -> None:
    """With zero advantages and no value term the loss is -ent_coef * entropy: a bonus (> 0) makes a
    gradient step widen the policy, a price (< 0, a negative ``ppo.ent_coef_final``) sharpens it."""
    model, batch = _model_and_batch()
    batch.advantages.zero_()
    cfg = PPOConfig(vf_coef=0.0, norm_adv=False).model_copy(update={"ent_coef": ent_coef})
    idx = torch.arange(ROWS)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss, parts = ppo_losses(model, batch, idx, cfg)
    before = float(parts["entropy"])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    after = float(ppo_losses(model, batch, idx, cfg)[1]["entropy"])
    assert (after - before) * ent_coef > 0, (before, after)
