"""run.update_precision: bfloat16 autocast of the update, float32 output layers, and what 'auto' picks."""

from __future__ import annotations

import pytest
import torch

from speedflip import accel
from speedflip.accel import GradientStep, make_gradient_step, resolve_update_precision
from speedflip.algos.ppo import Batch, ppo_losses, ppo_update
from speedflip.config import ConfigError, PPOConfig, build_config
from speedflip.models.mlp import ActorCritic, forward_float32_output

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("precision", "device", "native", "pays", "expected"),
    [
        ("float32", "cpu", True, True, "float32"),  # explicit values are kept
        ("bfloat16", "cpu", False, False, "bfloat16"),
        ("auto", "cpu", True, True, "bfloat16"),
        ("auto", "cpu", False, True, "float32"),  # no native bfloat16: emulated, slower
        ("auto", "cpu", True, False, "float32"),  # not measured to pay (Gymnasium, recurrent, DQN)
        ("auto", "cuda", True, True, "float32"),  # on CUDA run.amp decides
    ],
)
def test_resolve_update_precision(
    precision: str, device: str, native: bool, pays: bool, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(accel, "cpu_has_native_bfloat16", lambda: native)
    assert resolve_update_precision(precision, torch.device(device), pays) == expected


def test_bfloat16_step_autocasts_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accel, "cpu_has_native_bfloat16", lambda: False)
    step = make_gradient_step(CPU, amp=False, precision="bfloat16")
    assert step.dtype == torch.bfloat16 and step.scaler is None
    assert "bfloat16" in step.notes[0] and "no native bfloat16" in step.notes[0]
    layer = torch.nn.Linear(4, 4)
    with step.autocast():
        assert layer(torch.ones(2, 4)).dtype == torch.bfloat16
    with GradientStep(CPU).autocast():
        assert layer(torch.ones(2, 4)).dtype == torch.float32


def test_amp_and_bfloat16_together_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="keep one"):
        build_config({"run": {"amp": True, "update_precision": "bfloat16"}})


def test_float32_output_layer_under_autocast() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 5))
    x = torch.randn(16, 8)
    assert torch.equal(forward_float32_output(net, x), net(x))  # no autocast: exactly net(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = forward_float32_output(net, x)
        hidden = net[1](net[0](x))
    assert hidden.dtype == torch.bfloat16
    assert out.dtype == torch.float32
    # by hand: the bfloat16 hidden activations through the float32 output layer
    expected = hidden.float() @ net[2].weight.T + net[2].bias
    torch.testing.assert_close(out, expected)
    # an output layer alone (the recurrent model's heads without head layers) runs wholly in float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        alone = forward_float32_output(net[0], x)
    assert alone.dtype == torch.float32
    torch.testing.assert_close(alone, x @ net[0].weight.T + net[0].bias)


def _confident_policy() -> tuple[ActorCritic, Batch]:
    """A policy with large logits (like a trained one) and a batch whose old log-probs are float32."""
    torch.manual_seed(1)
    model = ActorCritic(24, 90, [64, 64], [64, 64])
    with torch.no_grad():
        # as after training: logits spread over a few units around a large common offset (which softmax
        # ignores, but rounding to bfloat16's 8 significant bits does not)
        model.policy[-1].weight.mul_(100.0)
        model.policy[-1].bias.fill_(20.0)
        obs = torch.randn(4096, 24)
        actions, log_probs, values = model.act(obs)
    advantages = torch.randn(4096)
    return model, Batch(obs, actions, log_probs, values, advantages, values + advantages)


def test_bfloat16_rounding_adds_almost_no_kl() -> None:
    """Before any step the policy equals the acting one, so the measured KL is rounding alone; with the
    output layer in float32 it is far below a real update's (~1e-3), unlike logits rounded to bfloat16."""
    model, batch = _confident_policy()
    idx = torch.arange(len(batch))
    cfg = PPOConfig()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        _, parts = ppo_losses(model, batch, idx, cfg)
        bf16_logits = model.policy(batch.obs)  # every layer in bfloat16, the logits too
    mixed_kl = float(parts["approx_kl"])
    log_probs = torch.log_softmax(bf16_logits.float(), -1).gather(1, batch.actions[:, None]).squeeze(1)
    log_ratio = log_probs - batch.log_probs
    all_bf16_kl = float(((log_ratio.exp() - 1) - log_ratio).mean())
    assert mixed_kl < 5e-5
    assert all_bf16_kl > 10 * mixed_kl


def test_ppo_update_in_bfloat16_learns_and_keeps_float32_weights() -> None:
    model, batch = _confident_policy()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-5)
    cfg = PPOConfig(minibatch_size=1024, update_epochs=2)
    step = make_gradient_step(CPU, amp=False, precision="bfloat16")
    idx = torch.arange(len(batch))
    loss_before, _ = ppo_losses(model, batch, idx, cfg)
    metrics = ppo_update(model, optimizer, batch, cfg, torch.Generator().manual_seed(0), step)
    loss_after, _ = ppo_losses(model, batch, idx, cfg)
    assert metrics["nonfinite_minibatches"] == 0
    assert all(p.dtype == torch.float32 and bool(torch.isfinite(p).all()) for p in model.parameters())
    assert float(loss_after.detach()) < float(loss_before.detach())
