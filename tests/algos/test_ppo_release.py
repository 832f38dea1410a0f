"""ppo.release_kl_coef: the learner freezes the policy when the kickstart ends, trains toward it with the KL
term, keeps it through a checkpoint, and a config without a kickstart that ends is refused."""

from __future__ import annotations

import pytest
import torch

from speedflip.algos.ppo import Batch
from speedflip.algos.ppo_learner import PPOLearner
from speedflip.config import ConfigError, build_config
from speedflip.models.build import build_policy_model
from speedflip.models.mlp import ActorCritic

OBS_DIM, NUM_ACTIONS, ROWS = 6, 5, 64


def _learner(seed: int = 0) -> PPOLearner:
    cfg = build_config({
        "ppo": {"num_steps": 8, "minibatch_size": 32, "update_epochs": 2, "learning_rate": 1e-2,
                "policy_layers": [16], "critic_layers": [16], "kickstart_coef": 0.5, "kickstart_steps": 100,
                "release_kl_coef": 1.0},
        "run": {"seed": seed, "device": "cpu"},
    })  # fmt: skip
    return PPOLearner(cfg, build_policy_model(cfg, OBS_DIM, NUM_ACTIONS), torch.device("cpu"), OBS_DIM)


def _batch(learner: PPOLearner) -> Batch:
    g = torch.Generator().manual_seed(5)
    obs = torch.randn(ROWS, OBS_DIM, generator=g)
    actions = torch.randint(0, NUM_ACTIONS, (ROWS,), generator=g)
    assert isinstance(learner.model, ActorCritic)
    with torch.no_grad():
        log_probs, _, values = learner.model.evaluate(obs, actions)
    anchor = None if learner.release_anchor is None else learner.release_anchor.anchor_logits(obs)
    advantages = torch.randn(ROWS, generator=g) * 5.0  # a strong push away from the released policy
    return Batch(obs, actions, log_probs, values, advantages, torch.randn(ROWS, generator=g), anchor_logits=anchor)


def test_the_released_policy_is_a_frozen_copy_kept_through_a_checkpoint() -> None:
    learner = _learner()
    learner.freeze_release_anchor()
    anchor = learner.release_anchor
    assert anchor is not None
    before = {k: v.clone() for k, v in anchor.state_dict().items()}
    batch = _batch(learner)
    assert batch.anchor_logits is not None and batch.anchor_logits.shape == (ROWS, NUM_ACTIONS)
    metrics = learner.update(batch)
    assert metrics["release_kl"] >= 0.0
    for k, v in anchor.state_dict().items():  # training moved the policy, not its frozen copy
        torch.testing.assert_close(v, before[k])
    moved = any(not torch.equal(v, learner.model.state_dict()[k]) for k, v in anchor.state_dict().items())
    assert moved

    state = learner.state_dict()
    resumed = _learner(seed=1)
    assert resumed.release_anchor is None
    resumed.load_state_dict(state)
    assert resumed.release_anchor is not None
    for k, v in resumed.release_anchor.state_dict().items():
        torch.testing.assert_close(v, before[k])


def test_a_warm_start_keeps_the_released_policy_only_when_it_keeps_the_schedule() -> None:
    """``--from`` with the step kept goes on pulling toward the same frozen policy; a fresh start has none
    (its own kickstart, if any, freezes its own at its release)."""
    learner = _learner()
    learner.freeze_release_anchor()
    learner.update(_batch(learner))
    state = learner.state_dict()
    assert learner.release_anchor is not None
    frozen = learner.release_anchor.state_dict()
    continued, fresh = _learner(seed=2), _learner(seed=3)
    continued.load_policy(state, keep_optimizer=True)
    fresh.load_policy(state, keep_optimizer=False)
    assert fresh.release_anchor is None and continued.release_anchor is not None
    for k, v in continued.release_anchor.state_dict().items():
        torch.testing.assert_close(v, frozen[k])


def test_the_kl_term_holds_the_policy_near_the_released_one() -> None:
    """Ten updates pushed by large random advantages: with the KL term the policy ends nearer (in KL) the
    policy it was released as than the same updates without it."""
    kls = []
    for coef in (0.0, 1.0):
        learner = _learner()
        learner.freeze_release_anchor()
        learner.ppo = learner.ppo.model_copy(update={"release_kl_coef": coef, "kickstart_coef": 0.0})
        batch = _batch(learner)
        for _ in range(10):
            learner.update(batch)
        assert learner.release_anchor is not None and batch.anchor_logits is not None
        anchor = torch.log_softmax(batch.anchor_logits, -1)
        assert isinstance(learner.model, ActorCritic)
        now = torch.log_softmax(learner.model.anchor_logits(batch.obs), -1)
        kls.append(float((anchor.exp() * (anchor - now)).sum(-1).mean()))
    assert kls[1] < 0.7 * kls[0], kls


@pytest.mark.parametrize("ppo", [{"release_kl_coef": 0.5}, {"release_kl_coef": 0.5, "kickstart_coef": 0.5}])
def test_a_release_kl_needs_a_kickstart_that_ends(ppo: dict[str, float]) -> None:
    with pytest.raises(
        ConfigError, match=r"release_kl_coef=0\.5.*set ppo\.kickstart_coef > 0 and ppo\.kickstart_steps"
    ):
        build_config({"ppo": ppo})
    build_config({"ppo": {**ppo, "kickstart_coef": 0.5, "kickstart_steps": 1000}})
