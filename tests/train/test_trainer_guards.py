"""Numerical guards of the trainer: NaN/Inf updates are skipped, the last good weights restored,
a persistent divergence stops the run; and the overlap of collection with learning."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from sf_helpers import tiny_config

from speedflip.algos.ppo import Batch
from speedflip.train.trainer import Trainer, TrainingDivergedError


def weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(a[k], b[k]) for k in a)


def poisoned(batch: Batch) -> Batch:
    advantages = batch.advantages.clone()
    advantages[3] = math.nan
    return Batch(batch.obs, batch.actions, batch.log_probs, batch.values, advantages, batch.returns, batch.masks)


@pytest.fixture
def trainer() -> Iterator[Trainer]:
    t = Trainer(tiny_config(run={"max_nonfinite_updates": 2, "max_nonfinite_restores": 2}))
    yield t
    t.close()


def test_nan_in_rollout_skips_the_update_and_keeps_the_weights(trainer: Trainer) -> None:
    batch, raw_obs, _ = trainer.collect()
    before = weights(trainer)
    rms_count = trainer.obs_rms.count
    metrics = trainer.update(poisoned(batch), raw_obs)
    assert same(before, weights(trainer))
    assert trainer.total_nonfinite_updates == 1 and trainer.nonfinite_updates_in_row == 1
    assert trainer.obs_rms.count == rms_count  # a bad rollout does not move the normalizer either
    assert math.isnan(metrics["nonfinite_minibatches"])
    assert "advantages" in trainer.last_nonfinite_reason


def test_nan_gradients_skip_every_minibatch(trainer: Trainer) -> None:
    batch, raw_obs, _ = trainer.collect()
    before = weights(trainer)
    handle = trainer.model.policy[0].weight.register_hook(lambda g: g * math.nan)
    metrics = trainer.update(batch, raw_obs)
    handle.remove()
    assert metrics["minibatch_updates"] == 0 and metrics["nonfinite_minibatches"] > 0
    assert same(before, weights(trainer))
    assert all(torch.isfinite(v).all() for v in weights(trainer).values())
    # a clean update afterwards trains and resets the counters
    batch, raw_obs, _ = trainer.collect()
    metrics = trainer.update(batch, raw_obs)
    assert metrics["nonfinite_minibatches"] == 0 and metrics["minibatch_updates"] > 0
    assert not same(before, weights(trainer))
    assert trainer.nonfinite_updates_in_row == 0


def test_restores_last_good_weights_then_stops_with_a_diagnosis(trainer: Trainer) -> None:
    batch, raw_obs, _ = trainer.collect()
    trainer.update(batch, raw_obs)  # a good update: these weights are the last good ones
    good = weights(trainer)
    # weights poisoned directly (as an Inf gradient step would): the next bad update restores at once
    with torch.no_grad():
        trainer.model.critic[0].weight.fill_(math.inf)
    trainer.update(poisoned(batch), raw_obs)
    assert trainer.total_weight_restores == 1
    assert same(good, weights(trainer))
    # max_nonfinite_updates=2 bad updates in a row -> second restore -> max_nonfinite_restores=2 reached
    trainer.update(poisoned(batch), raw_obs)
    with pytest.raises(TrainingDivergedError, match=r"learning rate.*Fix the cause, then resume"):
        trainer.update(poisoned(batch), raw_obs)
    assert same(good, weights(trainer))  # what a checkpoint would save now is the good state


def test_overlap_trains_the_same_first_update_as_sequential() -> None:
    """Overlap mode: rollout 0 is trained on in the background while rollout 1 is collected by the
    same weights that collected rollout 0; the weights after that update equal the sequential ones."""
    seq = Trainer(tiny_config())
    batch, raw_obs, _ = seq.collect()
    seq.update(batch, raw_obs)
    ovl = Trainer(tiny_config(run={"overlap_collection": True}))  # seeds torch's global generator again
    try:
        b0, r0, s0 = ovl.collect()
        assert torch.equal(b0.obs, batch.obs) and torch.equal(b0.actions, batch.actions)
        assert ovl.update(b0, r0) == {}  # nothing trained yet
        assert ovl.iteration == 0
        _, _, s1 = ovl.collect()  # trains on rollout 0 meanwhile
        assert ovl.iteration == 1 and s0.policy_version == 0 and s1.policy_version == 0
        assert same(weights(seq), weights(ovl))
        assert ovl.obs_rms.count == seq.obs_rms.count
        metrics = ovl.update(b0, r0)
        assert metrics["minibatch_updates"] > 0 and metrics["update_seconds"] > 0
        b2, r2, s2 = ovl.collect()
        assert s2.policy_version == 1 and ovl.iteration == 2
        ovl.update(b2, r2)
        assert ovl.iteration == 2 and ovl._pending is not None
        ovl.finish_pending_update()  # what save() does: nothing collected is left untrained
        assert ovl.iteration == 3 and ovl._pending is None
    finally:
        seq.close()
        ovl.close()


def test_overlap_update_error_reaches_the_main_thread() -> None:
    ovl = Trainer(tiny_config(run={"overlap_collection": True, "max_nonfinite_updates": 1,
                                   "max_nonfinite_restores": 1}))  # fmt: skip
    try:
        batch, raw_obs, _ = ovl.collect()
        ovl.update(poisoned(batch), raw_obs)
        with pytest.raises(TrainingDivergedError):
            ovl.collect()
    finally:
        ovl.close()


def test_amp_on_cpu_says_float32_and_compile_failure_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_compile(*args: object, **kwargs: object) -> object:
        raise RuntimeError("no C++ compiler found")

    monkeypatch.setattr(torch, "compile", broken_compile)
    trainer = Trainer(tiny_config(run={"amp": True, "compile": True}))
    try:
        assert any("float32" in note for note in trainer.notes)
        assert any("torch.compile failed (RuntimeError: no C++ compiler found); running eagerly" in n
                   for n in trainer.notes)  # fmt: skip
        assert trainer.model.compiled == {"policy": trainer.model.policy, "critic": trainer.model.critic}  # eager
        batch, raw_obs, _ = trainer.collect()
        assert trainer.update(batch, raw_obs)["minibatch_updates"] > 0
    finally:
        trainer.close()


@pytest.mark.slow
def test_compile_gives_the_same_outputs() -> None:
    trainer = Trainer(tiny_config(run={"compile": True}))
    try:
        assert set(trainer.model.compiled) == {"policy", "critic"}
        x = torch.randn(5, trainer.env.obs_dim)
        torch.testing.assert_close(trainer.model.compiled["policy"](x), trainer.model.policy(x))
        torch.testing.assert_close(trainer.model.value(x), trainer.model.critic(x).squeeze(-1))
    finally:
        trainer.close()


def test_a_dead_collector_stops_the_run_and_the_state_still_saves(tmp_path: Path) -> None:
    import os
    import signal

    from speedflip.collect.multiprocess import MultiProcessVecEnv
    from speedflip.errors import RunStoppedError

    trainer = Trainer(tiny_config(run={"collector": "multiprocess", "num_workers": 2, "max_worker_restarts": 0}))
    try:
        batch, raw_obs, _ = trainer.collect()
        trainer.update(batch, raw_obs)
        assert isinstance(trainer.env, MultiProcessVecEnv)
        pid = trainer.env.pids[0]
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(RunStoppedError, match="rollout collection failed"):
            trainer.collect()
        path = trainer.save(tmp_path / "checkpoints")  # the workers are gone; the learner's state is not
        assert (path / "model.safetensors").is_file()
    finally:
        trainer.close()
