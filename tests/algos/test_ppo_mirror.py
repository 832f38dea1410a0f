"""ppo.mirror_augment on the learner's side: the mirrored batch (worked by hand), the update's minibatches,
the asymmetry it reports, mirror-symmetric observation statistics, and the configs it refuses."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from speedflip.algos.ppo import Batch, mirror_batch, mirror_kl, ppo_update
from speedflip.algos.ppo_learner import PPOLearner
from speedflip.config import ConfigError, build_config
from speedflip.models.build import build_policy_model
from speedflip.models.mlp import ActorCritic
from speedflip.rollout import Mirror

OBS_DIM, NUM_ACTIONS, ROWS = 3, 3, 64
# a toy mirror: swap the first two features, negate the third; swap actions 0 and 1, action 2 its own mirror
SWAP = Mirror(np.array([1, 0, 2]), np.array([1.0, 1.0, -1.0], np.float32), np.array([1, 0, 2]))
IDENTITY = Mirror(np.arange(OBS_DIM), np.ones(OBS_DIM, np.float32), np.arange(NUM_ACTIONS))


def _cfg(**ppo: object) -> object:
    return build_config({
        "ppo": {"num_steps": 8, "minibatch_size": 16, "update_epochs": 2, "learning_rate": 1e-2,
                "policy_layers": [16], "critic_layers": [16], **ppo},
        "run": {"seed": 0, "device": "cpu"},
    })  # fmt: skip


def test_mirror_batch_by_hand() -> None:
    batch = Batch(
        obs=torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, -6.0]]),
        actions=torch.tensor([0, 2]),
        log_probs=torch.tensor([-0.5, -1.5]),
        values=torch.tensor([0.25, 0.75]),
        advantages=torch.tensor([1.0, -1.0]),
        returns=torch.tensor([1.25, -0.25]),
        teacher_actions=torch.tensor([1, 1]),
    )
    out = mirror_batch(batch, SWAP, "both")
    assert out.mirrored_rows is not None and out.mirrored_rows.tolist() == [False, False, True, True]
    assert len(out) == 4 and out.minibatch_scale == 2
    torch.testing.assert_close(out.obs, torch.tensor([[1.0, 2, 3], [4, 5, -6], [2, 1, -3], [5, 4, 6]]))
    assert out.actions.tolist() == [0, 2, 1, 2]
    assert out.teacher_actions is not None and out.teacher_actions.tolist() == [1, 1, 0, 0]
    # the mirrored row keeps the original's old log-probability, value, advantage and return
    assert out.log_probs.tolist() == [-0.5, -1.5, -0.5, -1.5]
    assert out.values.tolist() == [0.25, 0.75, 0.25, 0.75]
    assert out.advantages.tolist() == [1.0, -1.0, 1.0, -1.0]
    assert out.returns.tolist() == [1.25, -0.25, 1.25, -0.25]
    with pytest.raises(ValueError, match="masks"):
        masks = torch.ones(2, NUM_ACTIONS, dtype=torch.bool)
        mirror_batch(Batch(batch.obs, batch.actions, batch.log_probs, batch.values, batch.advantages,
                           batch.returns, masks=masks), SWAP, "both")  # fmt: skip
    with pytest.raises(ValueError, match="'both' or 'random'"):
        mirror_batch(batch, SWAP, "none")


def test_random_mirroring_replaces_about_half_the_rows_by_their_mirrors() -> None:
    g = torch.Generator().manual_seed(3)
    obs = torch.randn(1000, OBS_DIM, generator=g)
    actions = torch.randint(0, NUM_ACTIONS, (1000,), generator=g)
    zeros = torch.zeros(1000)
    batch = Batch(obs, actions, zeros - 1, zeros, torch.arange(1000.0), zeros, teacher_actions=actions.clone())
    out = mirror_batch(batch, SWAP, "random", torch.Generator().manual_seed(0))
    flip = out.mirrored_rows
    assert flip is not None and len(out) == 1000 and out.minibatch_scale == 1
    assert 450 < int(flip.sum()) < 550
    torch.testing.assert_close(out.obs[flip], SWAP.obs_tensor(obs[flip]))
    torch.testing.assert_close(out.obs[~flip], obs[~flip])
    assert out.actions[flip].tolist() == SWAP.action_index[actions[flip].numpy()].tolist()
    assert out.actions[~flip].tolist() == actions[~flip].tolist()
    assert out.teacher_actions is not None and out.teacher_actions.tolist() == out.actions.tolist()
    torch.testing.assert_close(out.advantages, batch.advantages)  # the row's advantage goes with its mirror
    again = mirror_batch(batch, SWAP, "random", torch.Generator().manual_seed(0))
    assert again.mirrored_rows is not None and torch.equal(again.mirrored_rows, flip)  # seeded


def _batch(model: ActorCritic, seed: int = 5) -> Batch:
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(ROWS, OBS_DIM, generator=g)
    actions = torch.randint(0, NUM_ACTIONS, (ROWS,), generator=g)
    with torch.no_grad():
        log_probs, _, values = model.evaluate(obs, actions)
    return Batch(obs, actions, log_probs, values, torch.randn(ROWS, generator=g), torch.randn(ROWS, generator=g))


def test_a_mirrored_update_takes_as_many_steps_on_twice_the_rows_and_reports_its_asymmetry() -> None:
    cfg = _cfg()
    model = build_policy_model(cfg, OBS_DIM, NUM_ACTIONS)
    assert isinstance(model, ActorCritic)
    plain = _batch(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    metrics = ppo_update(model, optimizer, plain, cfg.ppo, g)
    assert metrics["minibatch_updates"] == 2 * ROWS / 16 and "mirror_kl" not in metrics
    # the identity "mirror": each mirrored row is its original, so the policy is its own mirror (KL 0)
    metrics = ppo_update(model, optimizer, mirror_batch(_batch(model), IDENTITY, "both"), cfg.ppo, g)
    assert metrics["minibatch_updates"] == 2 * ROWS / 16
    assert metrics["mirror_kl"] == pytest.approx(0.0, abs=1e-6)
    # a real swap: an untrained policy is not its own mirror
    metrics = ppo_update(model, optimizer, mirror_batch(_batch(model), SWAP, "both"), cfg.ppo, g)
    assert metrics["mirror_kl"] > 1e-4
    metrics = ppo_update(model, optimizer, mirror_batch(_batch(model), SWAP, "random", g), cfg.ppo, g)
    assert metrics["minibatch_updates"] == 2 * ROWS / 16 and metrics["mirror_kl"] > 1e-4


def test_the_learner_keeps_mirror_symmetric_observation_statistics() -> None:
    cfg = _cfg(mirror_augment="both")
    with pytest.raises(ValueError, match="need the environment's mirror"):
        PPOLearner(cfg, build_policy_model(cfg, OBS_DIM, NUM_ACTIONS), torch.device("cpu"), OBS_DIM)
    learner = PPOLearner(cfg, build_policy_model(cfg, OBS_DIM, NUM_ACTIONS), torch.device("cpu"), OBS_DIM, SWAP)
    assert isinstance(learner.model, ActorCritic)
    raw = np.random.default_rng(0).normal([3.0, -1.0, 2.0], [1.0, 2.0, 0.5], size=(1, 50, OBS_DIM))
    learner.update(mirror_batch(_batch(learner.model), SWAP, "both"), raw.astype(np.float32))
    rms = learner.obs_rms
    assert rms.mean[0] == pytest.approx(rms.mean[1]) and rms.mean[2] == pytest.approx(0.0, abs=1e-9)
    assert rms.var[0] == pytest.approx(rms.var[1])
    # statistics loaded from a run without the mirror are made symmetric: the mixture of the data and its
    # mirror. By hand: feature 2 ~ mean 2, var 1 -> mixture of N(2, 1) and N(-2, 1): mean 0, var 1 + 2^2 = 5
    state = learner.state_dict()
    state.tensors["obs_rms.mean"] = torch.tensor([1.0, 3.0, 2.0], dtype=torch.float64)
    state.tensors["obs_rms.var"] = torch.tensor([1.0, 2.0, 1.0], dtype=torch.float64)
    learner.load_state_dict(state)
    np.testing.assert_allclose(learner.obs_rms.mean, [2.0, 2.0, 0.0])
    np.testing.assert_allclose(learner.obs_rms.var, [1.5 + 1.0, 1.5 + 1.0, 5.0])


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"gym": {"env_id": "CartPole-v1"}}, "Gymnasium"),
        ({"algo": "ppo_recurrent"}, "algo=ppo_recurrent"),
        ({"env": {"action_masking": True}}, "env.action_masking=true"),
    ],
)
def test_configs_the_mirror_does_not_fit_are_refused(overrides: dict[str, object], named: str) -> None:
    fix = r"set ppo\.mirror_augment=none and ppo\.mirror_coef=0"
    for setting, message in (({"mirror_augment": "both"}, r"ppo\.mirror_augment=both"),
                             ({"mirror_coef": 0.5}, r"ppo\.mirror_coef=0\.5")):  # fmt: skip
        with pytest.raises(ConfigError, match=rf"{message} .*{named}.*{fix}"):
            build_config({"ppo": {**setting, "minibatch_size": 256}} | overrides)


def test_the_symmetry_loss_is_the_policys_kl_from_its_mirror_and_training_on_it_lowers_it() -> None:
    cfg = _cfg(mirror_coef=1.0)
    model = build_policy_model(cfg, OBS_DIM, NUM_ACTIONS)
    assert isinstance(model, ActorCritic)
    obs = torch.randn(ROWS, OBS_DIM, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():  # a sharper untrained policy, so that its KL from its mirror is far from 0
        for parameter in model.policy.parameters():
            parameter.mul_(6.0)
    with torch.no_grad():  # by hand: p on the states, q(a) = pi(mirror(a) | mirror(s)) on their mirrors
        p = torch.softmax(model.policy_logits(obs), -1)
        q = torch.softmax(model.policy_logits(SWAP.obs_tensor(obs)), -1)[:, [1, 0, 2]]
        expected = (p * (p.log() - q.log())).sum(-1).mean()
    assert float(mirror_kl(model, obs, SWAP).detach()) == pytest.approx(float(expected), rel=1e-5)
    assert float(mirror_kl(model, obs, IDENTITY).detach()) == pytest.approx(0.0, abs=1e-6)
    # in the PPO loss: its part is reported, and with it the same updates leave the policy more symmetric
    batch = _batch(model)
    batch.mirror = SWAP
    before = float(mirror_kl(model, batch.obs, SWAP).detach())
    strong = _cfg(mirror_coef=10.0)
    trained: dict[float, ActorCritic] = {}
    for coef in (0.0, 10.0):
        copy = build_policy_model(cfg, OBS_DIM, NUM_ACTIONS)
        assert isinstance(copy, ActorCritic)
        copy.load_state_dict(model.state_dict())
        optimizer = torch.optim.Adam(copy.parameters(), lr=1e-2)
        ppo = (strong if coef else _cfg()).ppo
        for _ in range(20):
            metrics = ppo_update(copy, optimizer, batch, ppo, torch.Generator().manual_seed(0))
            assert ("mirror_loss" in metrics) == (coef > 0)  # not computed without the coefficient
        trained[coef] = copy
    with_loss, without = (float(mirror_kl(trained[c], batch.obs, SWAP).detach()) for c in (10.0, 0.0))
    assert with_loss < 0.5 * before and with_loss < 0.5 * without
