"""run.amp and run.compile in the learners of Gymnasium sessions; NaN/Inf optimizer steps are skipped."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gym_helpers import CounterEnv, gym_config

from speedflip.algos.dqn_learner import DQNLearner
from speedflip.algos.ppo_learner import PPOLearner
from speedflip.gym.run import GymSession
from speedflip.models.mlp import ActorCritic

TINY = {
    "ppo": ("cartpole-ppo", ["run.total_steps=512"]),
    "ppo_recurrent": ("cartpole-ppo", ["algo=ppo_recurrent", "run.total_steps=512", "recurrent.hidden_size=16"]),
    "dqn": ("cartpole-dqn", ["run.total_steps=600", "dqn.learning_starts=100", "dqn.train_frequency=64",
                             "dqn.gradient_steps=4", "gym.log_interval_steps=300"]),
}  # fmt: skip


def _learner(algo: str, *overrides: str) -> GymSession:
    preset, tiny = TINY[algo]
    return GymSession(gym_config(preset, *tiny, *overrides))


def _weights(learner: GymSession) -> list[torch.Tensor]:
    return [p.detach().clone() for p in learner.learner.model.parameters()]


def _train_and_check(learner: GymSession) -> dict[str, object]:
    """Train to the budget; the weights must move, stay finite, and no step may have been skipped."""
    before = _weights(learner)
    record: dict[str, object] = {}
    while learner.global_step < learner.cfg.run.total_steps:
        record = learner.iterate()
    after = _weights(learner)
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert all(bool(torch.isfinite(a).all()) for a in after)
    skipped = record.get("losses/nonfinite_steps", record.get("losses/nonfinite_minibatches"))
    assert skipped == 0
    return record


@pytest.mark.parametrize("algo", ["ppo", "ppo_recurrent", "dqn"])
def test_amp_on_cpu_says_float32_and_trains(algo: str) -> None:
    learner = _learner(algo, "run.amp=true")
    try:
        assert not learner.learner.gradient_step.amp and learner.learner.gradient_step.scaler is None
        assert any("float32" in note and "run.amp" in note for note in learner.accel_notes), learner.accel_notes
        _train_and_check(learner)
    finally:
        learner.close()


def test_no_flags_no_notes() -> None:
    learner = _learner("ppo")
    try:
        assert learner.accel_notes == []
        assert isinstance(learner.learner, PPOLearner)
        assert learner.learner.model.compiled == {}
    finally:
        learner.close()


def _failing_compile(*args: object, **kwargs: object) -> object:
    raise RuntimeError("no compiler here\nsecond line")


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_compile_falls_back_to_eager_with_a_note_and_trains(algo: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "compile", _failing_compile)
    learner = _learner(algo, "run.compile=true")
    try:
        assert len(learner.accel_notes) == 1
        assert "torch.compile failed (RuntimeError: no compiler here); running eagerly" in learner.accel_notes[0]
        inner = learner.learner
        if isinstance(inner, PPOLearner):  # the eager networks themselves stand in
            model = inner.model
            assert isinstance(model, ActorCritic)
            assert model.compiled == {"policy": model.policy, "critic": model.critic}
        else:
            assert isinstance(inner, DQNLearner)
            assert inner.q_net is inner.model and inner.target_net is inner.target
        _train_and_check(learner)
    finally:
        learner.close()


def test_compile_recurrent_runs_eagerly_with_a_note() -> None:
    learner = _learner("ppo_recurrent", "run.compile=true")
    try:
        assert any("recurrent" in note and "eagerly" in note for note in learner.accel_notes)
        _train_and_check(learner)
    finally:
        learner.close()


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_compile_compiles_or_falls_back_and_trains(algo: str) -> None:
    """The real torch.compile (tens of seconds per network on a small CPU): compiled, or eager with a note."""
    learner = _learner(algo, "run.compile=true")
    try:
        notes = [n for n in learner.accel_notes if n.startswith("torch.compile")]
        assert len(notes) == 1
        compiled = notes[0] == "torch.compile: networks compiled"
        assert compiled or "running eagerly" in notes[0]
        inner = learner.learner
        if isinstance(inner, PPOLearner):
            model = inner.model
            assert isinstance(model, ActorCritic)
            assert (model.compiled["policy"] is not model.policy) == compiled
        else:
            assert isinstance(inner, DQNLearner)
            assert (inner.q_net is not inner.model) == compiled
        _train_and_check(learner)
        # the checkpoint holds the plain module's weights, whatever was compiled
        ckpt = learner.to_checkpoint()
        assert set(ckpt.model) == set(learner.learner.model.state_dict())
    finally:
        learner.close()


@pytest.mark.filterwarnings("ignore:.*reward is a NaN value")
def test_nan_loss_dqn_steps_are_skipped_and_weights_unchanged() -> None:
    """Every reward is NaN, so every TD loss is: no step may change the weights; all are counted."""
    if "SfNanReward-v0" not in gym.registry:
        gym.register(id="SfNanReward-v0", entry_point=CounterEnv, kwargs={"limit": 5, "reward": float("nan")})
    learner = _learner("dqn", "gym.env_id=SfNanReward-v0")
    try:
        dqn = learner.learner
        assert isinstance(dqn, DQNLearner)
        before = _weights(learner)
        record: dict[str, object] = {}
        skipped = 0
        while learner.global_step < learner.cfg.run.total_steps:
            record = learner.iterate()
            skipped += int(record["losses/nonfinite_steps"])  # type: ignore[call-overload]
        assert dqn.gradient_steps_done > 0
        assert skipped == dqn.gradient_steps_done == dqn.nonfinite_steps
        assert record["losses/td_loss"] is None  # no applied step to average
        for a, b in zip(before, _weights(learner), strict=True):
            assert torch.equal(a, b)
        assert not np.isnan(dqn.epsilon)
    finally:
        learner.close()
