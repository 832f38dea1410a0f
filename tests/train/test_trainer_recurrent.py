"""Recurrent PPO inside the Rocket League trainer: per-agent state over batched arenas, stored
sequence-start states that reproduce the collection exactly, resets at episode ends, checkpoints,
recurrent players in matches and the pool."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from rich.console import Console
from sf_helpers import tiny_config

from speedflip.algos.ppo_recurrent import SequenceRollout
from speedflip.checkpoint import load_checkpoint
from speedflip.config import Config, ConfigError, build_config
from speedflip.models.recurrent import RecurrentActorCritic
from speedflip.selfplay.policies import NeuralPolicy
from speedflip.train.run import train
from speedflip.train.trainer import Trainer

RECURRENT: dict[str, Any] = {"cell": "gru", "hidden_size": 16, "num_layers": 1, "sequence_length": 4,
                             "encoder_layers": [16], "head_layers": [16]}  # fmt: skip


def recurrent_config(**sections: dict[str, Any]) -> Config:
    base = tiny_config(env={"timeout_seconds": 1.0}).model_dump()
    for name, values in sections.items():
        base[name] = {**base[name], **values}
    base["algo"] = "ppo_recurrent"
    base["recurrent"] = RECURRENT
    return build_config(base)


@pytest.fixture
def trainer() -> Iterator[Trainer]:
    t = Trainer(recurrent_config())
    yield t
    t.close()


def test_config_rules_for_recurrent_rocket_league() -> None:
    with pytest.raises(ConfigError, match=r"multiple of recurrent\.sequence_length"):
        build_config({**recurrent_config().model_dump(), "recurrent": {**RECURRENT, "sequence_length": 3}})
    with pytest.raises(ConfigError, match="lookup-table action form"):
        data = recurrent_config().model_dump()
        data["env"]["action_form"] = "continuous"
        build_config(data)


def test_rollout_states_replay_the_collection_exactly(trainer: Trainer) -> None:
    """Replaying each stored sequence from its stored start state, with the episode-start masks,
    gives back the log-probabilities and values computed while acting: the state bookkeeping
    (per agent, across resets inside a sequence) is exact."""
    assert isinstance(trainer.model, RecurrentActorCritic)
    rollout, _, _ = trainer.collect()
    rollout2, _, _ = trainer.collect()  # the state carries over from the first rollout
    for r in (rollout, rollout2):
        assert isinstance(r, SequenceRollout)
        T, N = r.actions.shape
        assert r.obs.shape == (T, N, trainer.env.obs_dim) and r.states.shape == (T // 4, 1, N, 16)
        seqs = r.sequences(4)
        log_probs, _, values = trainer.model.evaluate(seqs.obs, seqs.actions, seqs.states, seqs.starts)
        torch.testing.assert_close(log_probs, seqs.log_probs, atol=1e-5, rtol=0)
        torch.testing.assert_close(values, seqs.values, atol=1e-5, rtol=0)
    assert bool(rollout.starts[0].all())  # every agent starts an episode at the first step
    # 1-second episodes end inside the rollouts: resets happen mid-rollout, and they matter
    inner = rollout2.starts[1:]
    assert bool(inner.any())
    seqs = rollout2.sequences(4)
    _, _, values_no_reset = trainer.model.evaluate(seqs.obs, seqs.actions, seqs.states, torch.zeros_like(seqs.starts))
    assert not torch.allclose(values_no_reset, seqs.values, atol=1e-5)


def test_update_trains_and_checkpoint_round_trips(tmp_path: Path, trainer: Trainer) -> None:
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    rollout, raw_obs, _ = trainer.collect()
    metrics = trainer.update(rollout, raw_obs)
    assert metrics["minibatch_updates"] > 0 and metrics["nonfinite_minibatches"] == 0
    assert any(not torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())
    path = trainer.save(tmp_path / "checkpoints")
    ckpt = load_checkpoint(path)
    assert ckpt.meta["compat"]["recurrent"] == {"cell": "gru", "hidden_size": 16, "num_layers": 1,
                                                "encoder_layers": [16], "head_layers": [16]}  # fmt: skip
    other = Trainer(recurrent_config())
    try:
        other.load(path)
        for k, v in trainer.model.state_dict().items():
            assert torch.equal(other.model.state_dict()[k], v)
    finally:
        other.close()


def test_recurrent_checkpoint_plays_with_memory_that_resets(tmp_path: Path, trainer: Trainer) -> None:
    path = trainer.save(tmp_path / "checkpoints")
    policy = NeuralPolicy(path, trainer.env.obs_dim, trainer.env.num_actions, deterministic=True)
    obs = np.random.default_rng(0).normal(size=(4, trainer.env.obs_dim)).astype(np.float32)
    fresh = policy.memory.logits(torch.as_tensor(obs)).clone()
    later = policy.memory.logits(torch.as_tensor(obs)).clone()
    assert not torch.allclose(fresh, later)  # the second call remembers the first
    policy.reset(np.array([1, 3]))
    again = policy.memory.logits(torch.as_tensor(obs))
    torch.testing.assert_close(again[[1, 3]], fresh[[1, 3]])  # reset rows start from zero state
    assert not torch.allclose(again[[0, 2]], fresh[[0, 2]])


def test_recurrent_self_play_against_the_pool_and_rule_eval(tmp_path: Path) -> None:
    cfg = recurrent_config(
        env={"num_arenas": 4, "timeout_seconds": 1.0},
        selfplay={"opponent_share": 0.5, "eval_games": 2, "eval_game_seconds": 3.0},
    )
    trainer = Trainer(cfg, tmp_path)
    try:
        trainer.milestone()  # a recurrent snapshot joins the pool
        assert any(m.path for m in trainer.matchmaker.members)
        for _ in range(2):
            rollout, raw_obs, _ = trainer.collect()
            trainer.update(rollout, raw_obs)
        results = trainer.evaluate_vs_rule()
        assert 0.0 <= float(results["selfplay/score_rate_vs_rule"] or 0.0) <= 1.0
    finally:
        trainer.close()


def test_cli_train_and_resume_recurrent(tmp_path: Path) -> None:
    data = recurrent_config(run={"total_steps": 64, "checkpoint_interval_steps": 32,
                                 "milestone_replays": False}).model_dump()  # fmt: skip
    console = Console(file=open(tmp_path / "log.txt", "w"), width=200)  # noqa: SIM115
    assert train(build_config(data), tmp_path / "run", console=console) == 0
    data["run"]["total_steps"] = 128
    assert train(build_config(data), tmp_path / "run", console=console) == 0
    text = (tmp_path / "log.txt").read_text()
    assert "resumed from" in text and "checkpoints/64" in text
    assert (tmp_path / "run" / "checkpoints" / "128").is_dir()
