"""Trained checkpoints as match players: loading, obs-size mismatches, missing paths."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from speedflip.checkpoint import CheckpointError, list_checkpoints
from speedflip.env.arenas import GameArrays
from speedflip.env.obs import DefaultObs
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.selfplay.match import match_env_config, play_match, summarize
from speedflip.selfplay.policies import EnsemblePolicy, NeuralPolicy, find_checkpoint, resolve_policy


def _table() -> np.ndarray:
    env = RocketLeagueVecEnv(match_env_config(2, 1, 5.0), seed=0)
    env.close()
    return env.actions.table


def test_run_dir_loads_as_neural_policy(run_1v1: Path) -> None:
    ckpt = list_checkpoints(run_1v1 / "checkpoints")[-1]
    obs_dim = DefaultObs(1, 1).obs_dim
    table = _table()
    for spec in (str(run_1v1), str(ckpt)):  # the run dir (newest checkpoint) or the checkpoint folder
        policy = resolve_policy(spec, obs_dim, table, seed=1)
        assert isinstance(policy, NeuralPolicy)
        assert policy.path == ckpt
        assert policy.global_step == int(ckpt.name) == 32  # 2 arenas x 2 cars x 8 steps
        assert policy.name == f"tiny1v1@{policy.global_step}"


def test_neural_policy_plays_a_match(run_1v1: Path) -> None:
    env = RocketLeagueVecEnv(match_env_config(2, 1, 5.0), seed=0)
    try:
        policy = resolve_policy(str(run_1v1), env.obs_dim, env.actions.table, seed=1, deterministic=True)
        obs = env.reset()
        a = policy.act(obs, env.state, env.car_teams)
        b = policy.act(obs, env.state, env.car_teams)
        assert a.shape == (env.num_agents,) and a.min() >= 0 and a.max() < env.num_actions
        np.testing.assert_array_equal(a, b)  # deterministic: the argmax, every time
        rule = resolve_policy("rule", env.obs_dim, env.actions.table)
        s = summarize(play_match(env, policy, rule, 5.0))
        assert s.games == 2 and s.wins + s.draws + s.losses == 2
    finally:
        env.close()


def test_sampling_policy_is_seeded(run_1v1: Path) -> None:
    env = RocketLeagueVecEnv(match_env_config(16, 1, 5.0), seed=0)
    try:
        obs = env.reset()
        p1 = resolve_policy(str(run_1v1), env.obs_dim, env.actions.table, seed=4)
        p2 = resolve_policy(str(run_1v1), env.obs_dim, env.actions.table, seed=4)
        a1 = np.concatenate([p1.act(obs, env.state, env.car_teams) for _ in range(3)])
        a2 = np.concatenate([p2.act(obs, env.state, env.car_teams) for _ in range(3)])
        np.testing.assert_array_equal(a1, a2)
        assert len(np.unique(a1)) > 1  # a barely trained policy samples, it does not always pick one row
    finally:
        env.close()


def test_checkpoint_with_another_obs_size_is_refused(run_2v2: Path) -> None:
    obs_1v1 = DefaultObs(1, 1).obs_dim
    obs_2v2 = DefaultObs(2, 2).obs_dim
    assert obs_1v1 != obs_2v2
    with pytest.raises(CheckpointError) as err:
        resolve_policy(str(run_2v2), obs_1v1, _table())
    message = str(err.value)
    assert f"obs size {obs_2v2}" in message and f"obs size {obs_1v1}" in message
    assert "--team-size" in message
    # at its own team size it loads
    assert isinstance(resolve_policy(str(run_2v2), obs_2v2, _table()), NeuralPolicy)


def test_missing_path_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_run"
    with pytest.raises(CheckpointError, match="no_such_run") as err:
        resolve_policy(str(missing), 103, _table())
    assert "rule, random, idle" in str(err.value)


def test_run_dir_without_checkpoints_is_refused(tmp_path: Path, run_1v1: Path) -> None:
    empty = tmp_path / "empty_run"
    empty.mkdir()
    with pytest.raises(CheckpointError, match="no usable checkpoint"):
        find_checkpoint(str(empty))
    # a damaged newest checkpoint is skipped in favour of nothing else -> the reason is given
    broken = tmp_path / "broken_run"
    shutil.copytree(run_1v1, broken)
    ckpt = list_checkpoints(broken / "checkpoints")[-1]
    (ckpt / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match=r"model\.safetensors"):
        find_checkpoint(str(broken))


def _milestone_run(tmp_path: Path, run_1v1: Path, steps: tuple[int, ...]) -> Path:
    """A run whose ``milestones/main/<step>`` folders are copies of the tiny run's checkpoint."""
    run = tmp_path / "ens_run"
    ckpt = list_checkpoints(run_1v1 / "checkpoints")[-1]
    for step in steps:
        shutil.copytree(ckpt, run / "milestones" / "main" / str(step))
    return run


def test_last_n_spec_is_an_ensemble_of_the_newest_milestones(tmp_path: Path, run_1v1: Path) -> None:
    run = _milestone_run(tmp_path, run_1v1, (100, 200, 300))
    policy = resolve_policy(f"{run}@last2", DefaultObs(1, 1).obs_dim, _table(), deterministic=True)
    assert isinstance(policy, EnsemblePolicy)
    assert [m.path.name for m in policy.members] == ["200", "300"]  # oldest first, the newest two
    assert policy.name == "ens_run@last2" and policy.path.name == "300"
    assert find_checkpoint(f"{run}@last2").name == "300"  # its config and observation settings: the newest member's


def test_ensemble_needs_enough_milestones(tmp_path: Path, run_1v1: Path) -> None:
    run = _milestone_run(tmp_path, run_1v1, (100, 200))
    with pytest.raises(CheckpointError, match=r"2 milestone\(s\) that verify, not 4") as err:
        resolve_policy(f"{run}@last4", DefaultObs(1, 1).obs_dim, _table())
    assert "@last2" in str(err.value)  # the fix: ask for fewer
    with pytest.raises(CheckpointError, match="has no milestones"):
        resolve_policy(f"{run_1v1}@last2", DefaultObs(1, 1).obs_dim, _table())


def _fixed_logits(probs: list[float], num_actions: int) -> torch.Tensor:
    """Logits whose softmax is ``probs`` on the first actions and exactly 0 on the rest (one row)."""
    logits = torch.full((1, num_actions), -1e9)
    for i, p in enumerate(probs):
        if p > 0:
            logits[0, i] = float(np.log(p))
    return logits


def test_ensemble_takes_the_mean_of_the_members_probabilities(
    tmp_path: Path, run_1v1: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _milestone_run(tmp_path, run_1v1, (100, 200))
    table = _table()
    policy = resolve_policy(f"{run}@last2", DefaultObs(1, 1).obs_dim, table, deterministic=True, seed=5)
    assert isinstance(policy, EnsemblePolicy)
    first, second = policy.members
    # first prefers action 0 (0.6 / 0.4 / 0), second action 2 (0 / 0.45 / 0.55); their mean is
    # 0.3 / 0.425 / 0.275: the ensemble takes action 1, the one neither member would take alone
    monkeypatch.setattr(first, "logits", lambda obs: _fixed_logits([0.6, 0.4, 0.0], table.shape[0]))
    monkeypatch.setattr(second, "logits", lambda obs: _fixed_logits([0.0, 0.45, 0.55], table.shape[0]))
    obs = np.zeros((1, DefaultObs(1, 1).obs_dim), np.float32)
    state, teams = GameArrays.empty(1, 2), np.zeros(1, np.int64)  # not read by neural players
    np.testing.assert_allclose(policy.probabilities(obs)[0, :3].numpy(), [0.3, 0.425, 0.275], atol=1e-6)
    assert policy.act(obs, state, teams).tolist() == [1]
    policy.deterministic = False  # sampled: draws from the mean, seeded
    draws = np.concatenate([policy.act(obs, state, teams) for _ in range(4000)])
    counts = np.bincount(draws, minlength=3)[:3] / draws.size
    np.testing.assert_allclose(counts, [0.3, 0.425, 0.275], atol=0.03)
    assert draws.max() <= 2
