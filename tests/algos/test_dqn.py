"""DQN pieces with hand-computed values: epsilon schedule, replay buffer, TD targets, target updates."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from speedflip.accel import make_gradient_step
from speedflip.algos.dqn import (
    ReplayBuffer,
    ReplaySample,
    dqn_update,
    epsilon_at,
    epsilon_greedy,
    linear_schedule,
    td_targets,
    update_target,
)
from speedflip.config import DQNConfig
from speedflip.models.q import QNetwork


# ---------------------------------------------------------------------- epsilon
def test_linear_schedule() -> None:
    assert linear_schedule(1.0, 0.05, 100, 0) == 1.0
    assert linear_schedule(1.0, 0.05, 100, 50) == pytest.approx(0.525)
    assert linear_schedule(1.0, 0.05, 100, 100) == pytest.approx(0.05)
    assert linear_schedule(1.0, 0.05, 100, 10_000) == 0.05  # stays at the end value
    assert linear_schedule(0.0, 1.0, 10, 5) == 0.5  # increasing schedules clamp too
    assert linear_schedule(0.0, 1.0, 10, 50) == 1.0
    assert linear_schedule(1.0, 0.1, 0, 0) == 0.1


def test_epsilon_decays_over_30_percent_of_training() -> None:
    cfg = DQNConfig()  # 1.0 -> 0.05 over 0.3
    total = 100_000
    assert epsilon_at(0, cfg, total) == 1.0
    assert epsilon_at(15_000, cfg, total) == pytest.approx(0.525)  # half way through the decay
    assert epsilon_at(30_000, cfg, total) == pytest.approx(0.05)
    assert epsilon_at(90_000, cfg, total) == pytest.approx(0.05)


def test_epsilon_greedy_extremes() -> None:
    q = torch.tensor([[0.0, 1.0, 0.5], [2.0, 0.0, 0.0]])
    rng = np.random.default_rng(0)
    assert epsilon_greedy(q, 0.0, rng).tolist() == [1, 0]
    draws = np.stack([epsilon_greedy(q, 1.0, rng) for _ in range(300)])
    assert set(draws[:, 0].tolist()) == {0, 1, 2}  # uniform over all actions


# ---------------------------------------------------------------------- replay buffer
def _add(buf: ReplayBuffer, start: int, n: int) -> None:
    ids = np.arange(start, start + n, dtype=np.float32)
    buf.add(ids[:, None].repeat(2, 1), ids.astype(np.int64), ids, ids[:, None].repeat(2, 1) + 0.5, ids % 2)


def test_replay_buffer_wraps_around_and_overwrites_oldest() -> None:
    buf = ReplayBuffer(capacity=5, obs_dim=2)
    _add(buf, 0, 3)
    assert (buf.pos, len(buf), buf.full) == (3, 3, False)
    _add(buf, 3, 4)  # rows 3, 4, then 0, 1
    assert (buf.pos, len(buf), buf.full) == (2, 5, True)
    assert buf.actions.tolist() == [5, 6, 2, 3, 4]
    np.testing.assert_array_equal(buf.next_obs[:, 0], [5.5, 6.5, 2.5, 3.5, 4.5])
    np.testing.assert_array_equal(buf.terminated, [1, 0, 0, 1, 0])


def test_replay_buffer_samples_only_filled_rows() -> None:
    buf = ReplayBuffer(capacity=100, obs_dim=2)
    _add(buf, 0, 4)
    sample = buf.sample(256, np.random.default_rng(1), torch.device("cpu"))
    assert set(sample.actions.tolist()) == {0, 1, 2, 3}
    assert torch.equal(sample.obs[:, 0], sample.actions.float())  # rows stay aligned
    assert torch.equal(sample.next_obs[:, 0], sample.rewards + 0.5)
    with pytest.raises(ValueError, match="empty"):
        ReplayBuffer(3, 2).sample(1, np.random.default_rng(0), torch.device("cpu"))


def test_replay_buffer_state_round_trip() -> None:
    buf = ReplayBuffer(capacity=5, obs_dim=2)
    _add(buf, 0, 7)
    other = ReplayBuffer(capacity=5, obs_dim=2)
    other.load_state_dict(buf.state_dict())
    assert (other.pos, other.full) == (2, True)
    for name in ("obs", "next_obs", "actions", "rewards", "terminated"):
        np.testing.assert_array_equal(getattr(other, name), getattr(buf, name))
    partial = ReplayBuffer(capacity=5, obs_dim=2)
    _add(partial, 0, 3)
    restored = ReplayBuffer(capacity=5, obs_dim=2)
    restored.load_state_dict(partial.state_dict())
    assert (restored.pos, len(restored), restored.full) == (3, 3, False)
    empty = ReplayBuffer(capacity=5, obs_dim=2)
    empty.load_state_dict(partial.state_dict(with_contents=False))
    assert (empty.pos, len(empty)) == (0, 0)
    with pytest.raises(ValueError, match="does not fit"):
        ReplayBuffer(capacity=2, obs_dim=2).load_state_dict(partial.state_dict())


# ---------------------------------------------------------------------- targets and updates
def _fixed_q(values: list[list[float]]) -> QNetwork:
    """A Q-network whose output for one-hot observation i is ``values[i]`` (one linear layer, no bias)."""
    n, a = len(values), len(values[0])
    net = QNetwork(n, a, [1])
    net.net = nn.Sequential(nn.Linear(n, a, bias=False))
    with torch.no_grad():
        net.net[0].weight.copy_(torch.tensor(values).T)
    return net


def test_double_dqn_target_by_hand() -> None:
    # next states 0 and 1 (one-hot). Online prefers action 0 in state 0; target prefers action 1.
    online = _fixed_q([[5.0, 1.0], [0.0, 3.0]])
    target = _fixed_q([[2.0, 4.0], [7.0, 6.0]])
    batch = ReplaySample(
        obs=torch.eye(2),
        actions=torch.tensor([0, 1]),
        rewards=torch.tensor([1.0, -1.0]),
        next_obs=torch.eye(2),
        terminated=torch.tensor([0.0, 1.0]),
    )
    # plain: r + 0.9 * max_a Q_target(s', a) = 1 + 0.9 * 4 ; terminal: -1
    assert td_targets(online, target, batch, 0.9, double=False).tolist() == pytest.approx([4.6, -1.0])
    # double: a* = argmax online = 0 -> Q_target(s', 0) = 2 -> 1 + 0.9 * 2
    assert td_targets(online, target, batch, 0.9, double=True).tolist() == pytest.approx([2.8, -1.0])
    batch.terminated = torch.tensor([0.0, 0.0])
    # state 1: online argmax = 1 -> Q_target = 6 -> -1 + 5.4; plain: max(7, 6) = 7 -> -1 + 6.3
    assert td_targets(online, target, batch, 0.9, double=True).tolist() == pytest.approx([2.8, 4.4])
    assert td_targets(online, target, batch, 0.9, double=False).tolist() == pytest.approx([4.6, 5.3])


def test_dqn_update_moves_q_towards_the_target() -> None:
    torch.manual_seed(0)
    online, target = QNetwork(2, 2, [8]), QNetwork(2, 2, [8])
    batch = ReplaySample(
        torch.eye(2), torch.tensor([0, 1]), torch.tensor([1.0, 2.0]), torch.eye(2), torch.tensor([1.0, 1.0])
    )  # fmt: skip  (terminal: the targets are just the rewards)
    opt = torch.optim.Adam(online.parameters(), lr=0.05)
    cfg = DQNConfig(gamma=0.9)
    first = dqn_update(online, target, opt, batch, cfg)["td_loss"]
    for _ in range(200):
        last = dqn_update(online, target, opt, batch, cfg)["td_loss"]
    assert last < first * 0.01
    q = online(torch.eye(2))
    assert q[0, 0].item() == pytest.approx(1.0, abs=0.05) and q[1, 1].item() == pytest.approx(2.0, abs=0.05)


def test_hard_and_soft_target_updates() -> None:
    online, target = nn.Linear(1, 1), nn.Linear(1, 1)
    with torch.no_grad():
        online.weight.fill_(1.0)
        online.bias.fill_(2.0)
        target.weight.fill_(0.0)
        target.bias.fill_(0.0)
    update_target(online, target, tau=0.25)  # 0.25 * online + 0.75 * target
    assert target.weight.item() == pytest.approx(0.25) and target.bias.item() == pytest.approx(0.5)
    update_target(online, target, tau=0.25)
    assert target.weight.item() == pytest.approx(0.4375)  # 0.25 + 0.75 * 0.25
    update_target(online, target, tau=1.0)
    assert target.weight.item() == 1.0 and target.bias.item() == 2.0


@pytest.mark.parametrize(("loss", "expected"), [("mse", (4.0 + 0.25) / 2), ("huber", (1.5 + 0.125) / 2)])
def test_td_loss_by_hand(loss: str, expected: float) -> None:
    online = _fixed_q([[3.0, 0.0], [0.0, 1.5]])
    # terminal transitions: targets are the rewards 1.0 and 1.0; errors 2.0 and 0.5
    batch = ReplaySample(torch.eye(2), torch.tensor([0, 1]), torch.tensor([1.0, 1.0]), torch.eye(2),
                         torch.tensor([1.0, 1.0]))  # fmt: skip
    opt = torch.optim.SGD(online.parameters(), lr=0.0)
    metrics = dqn_update(online, _fixed_q([[0.0, 0.0], [0.0, 0.0]]), opt, batch, DQNConfig(loss=loss))
    assert metrics["td_loss"] == pytest.approx(expected)
    assert metrics["q_values"] == pytest.approx(2.25)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nonfinite_dqn_step_is_skipped_and_weights_unchanged(bad: float) -> None:
    torch.manual_seed(0)
    online, target = QNetwork(2, 2, [8]), QNetwork(2, 2, [8])
    batch = ReplaySample(torch.eye(2), torch.tensor([0, 1]), torch.tensor([1.0, bad]), torch.eye(2),
                         torch.tensor([0.0, 0.0]))  # fmt: skip
    opt = torch.optim.Adam(online.parameters(), lr=0.05)
    before = [p.detach().clone() for p in online.parameters()]
    step = make_gradient_step(torch.device("cpu"), amp=False)
    metrics = dqn_update(online, target, opt, batch, DQNConfig(), step)
    assert metrics["nonfinite_steps"] == 1.0
    for a, b in zip(before, online.parameters(), strict=True):
        assert torch.equal(a, b)
    assert not opt.state  # Adam never stepped: no moments were created
    # a finite batch afterwards steps normally
    batch.rewards = torch.tensor([1.0, 2.0])
    metrics = dqn_update(online, target, opt, batch, DQNConfig(), step)
    assert metrics["nonfinite_steps"] == 0.0 and np.isfinite(metrics["grad_norm"])
    assert any(not torch.equal(a, b) for a, b in zip(before, online.parameters(), strict=True))
