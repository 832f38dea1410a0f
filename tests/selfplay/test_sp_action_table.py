"""A run trained with its own lookup table (``env.action_table``) plays matches, the pool and eval with it.

Policies act in their own table; a match decodes a player whose table differs from the env's with
that player's table; the opponent pool (indices only) refuses members with another table.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sp_helpers import tiny_config

from speedflip.checkpoint import CheckpointError
from speedflip.cli import main
from speedflip.config import EnvConfig, SelfPlayConfig
from speedflip.env.action_forms import build_table, same_table
from speedflip.env.actions import default_lookup_table
from speedflip.env.arenas import GameArrays
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.selfplay.evaluate import training_obs_options
from speedflip.selfplay.match import match_env_config, play_match, step_inputs, summarize
from speedflip.selfplay.matchmaker import Matchmaker
from speedflip.selfplay.policies import NeuralPolicy, ScriptedPolicy, find_checkpoint, resolve_policy
from speedflip.selfplay.rule_policy import RulePolicy
from speedflip.train.trainer import Trainer

THREE = [-1.0, 0.0, 1.0]
CUSTOM = {"steer": THREE, "torque": THREE}


@pytest.fixture(scope="module")
def custom_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny 1v1 run trained with the 81-row table of steer/torque bins [-1, 0, 1]."""
    run = tmp_path_factory.mktemp("runs") / "custom1v1"
    trainer = Trainer(tiny_config(env={"action_table": CUSTOM}))
    try:
        assert trainer.env.num_actions == 81
        batch, raw_obs, _ = trainer.collect()
        trainer.update(batch, raw_obs)
        trainer.save(run / "checkpoints")
    finally:
        trainer.close()
    return run


class FixedPolicy:
    """Always the same row of its own table (to see which controls a match applies)."""

    def __init__(self, index: int, table: np.ndarray | None, name: str = "fixed") -> None:
        self.index, self.table, self.name = index, table, name

    def act(self, obs: np.ndarray, state: GameArrays, car_teams: np.ndarray) -> np.ndarray:
        return np.full(obs.shape[0], self.index, np.int64)

    def reset(self, rows: np.ndarray) -> None:
        """Stateless."""


def test_checkpoint_policy_acts_in_its_own_table(custom_run: Path) -> None:
    options = training_obs_options(str(custom_run))
    assert options["action_table"] is not None
    env = RocketLeagueVecEnv(match_env_config(2, 1, 5.0, obs_options=options), seed=0)
    try:
        assert env.num_actions == 81 and same_table(env.actions.table, build_table(THREE, THREE, THREE))
        policy = resolve_policy(str(custom_run), env.obs_dim, env.actions.table, seed=1)
        assert isinstance(policy, NeuralPolicy) and same_table(policy.table, env.actions.table)
        rule = resolve_policy("rule", env.obs_dim, env.actions.table)
        summary = summarize(play_match(env, policy, rule, 5.0))
        assert summary.games == 2
    finally:
        env.close()


def test_a_checkpoint_is_refused_where_its_indices_would_mean_other_controls(custom_run: Path) -> None:
    env = RocketLeagueVecEnv(match_env_config(2, 1, 5.0), seed=0)  # the default table
    try:
        with pytest.raises(CheckpointError, match="81 actions"):
            resolve_policy(str(custom_run), env.obs_dim, env.actions.table)
        reordered = build_table(THREE, THREE, THREE)[::-1].copy()  # 81 rows too, in another order
        with pytest.raises(CheckpointError, match="another lookup table"):
            NeuralPolicy(find_checkpoint(str(custom_run)), env.obs_dim, table=reordered)
        # in a match it may keep its own table: the match decodes it
        own = resolve_policy(str(custom_run), env.obs_dim, env.actions.table, own_table=True)
        assert isinstance(own, NeuralPolicy) and len(own.table) == 81
    finally:
        env.close()


def test_match_decodes_each_players_indices_with_its_own_table() -> None:
    default, custom = default_lookup_table(), build_table(THREE, THREE, THREE)
    env = RocketLeagueVecEnv(match_env_config(2, 1, 5.0, action_table=CUSTOM), seed=0)
    try:
        assert env.num_actions == 81
        obs = env.reset()
        a_rows = np.array([True, False, False, True])  # A blue in arena 0, orange in arena 1
        # A picks row 85 of the default table (which the env's 81-row table does not even have), B row 80 of the env's
        a, b = FixedPolicy(85, default, "a"), FixedPolicy(80, None, "b")
        actions, custom_controls = step_inputs(env, obs, ((a, a_rows), (b, ~a_rows)))
        assert custom_controls is not None
        assert np.isnan(custom_controls[~a_rows]).all() and (actions[~a_rows] == 80).all()
        env.step(actions, custom_controls)
        applied = env.prev_controls.reshape(-1, 8)
        np.testing.assert_array_equal(applied[a_rows], np.repeat(default[[85]], 2, 0))
        np.testing.assert_array_equal(applied[~a_rows], np.repeat(custom[[80]], 2, 0))
        # the same table as the env: plain indices, no custom controls
        actions, custom_controls = step_inputs(env, obs, ((FixedPolicy(3, custom), a_rows), (b, ~a_rows)))
        assert custom_controls is None and (actions[a_rows] == 3).all()
        # a whole match between a default-table and a custom-table player
        results = play_match(env, ScriptedPolicy(RulePolicy(default)), FixedPolicy(80, None), 3.0)
        assert len(results) == 2
    finally:
        env.close()


def test_rule_bot_falls_back_to_its_own_table_in_matches() -> None:
    lacking = build_table([-1.0, 0.0, 1.0], [-0.5, 0.0, 0.5], [-1.0, 0.0, 1.0])  # no full steer rows
    with pytest.raises(ValueError, match="lookup table lacks"):
        RulePolicy(lacking)
    rule = RulePolicy.for_table(lacking)
    assert same_table(rule.table, default_lookup_table())
    env = RocketLeagueVecEnv(
        match_env_config(2, 1, 3.0, action_table={"steer": [-0.5, 0.0, 0.5], "torque": THREE}), seed=0
    )
    try:
        assert same_table(env.actions.table, lacking)
        player = resolve_policy("rule", env.obs_dim, env.actions.table, own_table=True)
        assert summarize(play_match(env, player, resolve_policy("idle", env.obs_dim, env.actions.table), 3.0)).games
    finally:
        env.close()


def test_pool_refuses_members_with_another_table(custom_run: Path, tmp_path: Path) -> None:
    default_env = RocketLeagueVecEnv(EnvConfig(num_arenas=2, state_setters={"kickoff": 1.0}), seed=0)
    custom_env = RocketLeagueVecEnv(
        EnvConfig(num_arenas=2, action_table=CUSTOM, state_setters={"kickoff": 1.0}), seed=0
    )
    try:
        sp = SelfPlayConfig(opponent_share=0.5)
        checkpoint = find_checkpoint(str(custom_run))
        mm = Matchmaker(sp, 0.5, 2, default_env.car_teams, default_env.actions.table, default_env.obs_dim, None, 0)
        mm.add_snapshot(checkpoint)
        assert [m.name for m in mm.members] == ["rule"]
        assert any("another action table" in note for note in mm.notes)
        # with the learner's own table it is a pool member and acts
        mm = Matchmaker(sp, 1.0, 2, custom_env.car_teams, custom_env.actions.table, custom_env.obs_dim, None, 0)
        mm.add_snapshot(checkpoint)
        assert len(mm.members) == 2
        obs = custom_env.reset()
        mm.opponent[:] = 1  # the snapshot in both pool arenas
        out = mm.fill_opponent_actions(np.zeros(custom_env.num_agents, np.int64), obs, custom_env.state)
        assert out.max() < 81
        custom_env.step(out)
        # a table without the rule bot's rows: it is left out with a note, not a crash
        lacking = build_table(THREE, [-0.5, 0.0, 0.5], THREE)
        mm = Matchmaker(sp, 0.5, 2, custom_env.car_teams, lacking, custom_env.obs_dim, None, 0)
        assert mm.members == [] and any("rule bot cannot play" in note for note in mm.notes)
    finally:
        default_env.close()
        custom_env.close()


def test_eval_cli_with_a_custom_table_run(custom_run: Path, tmp_path: Path, run_1v1: Path) -> None:
    out = tmp_path / "m.json"
    league = tmp_path / "league.json"
    args = ["eval", str(custom_run), "rule", "--games", "2", "--game-seconds", "3", "--league", str(league)]
    assert main([*args, "--json", str(out)]) == 0
    assert json.loads(out.read_text())["games"] == 2
    # against a run trained with the default table: each side acts with its own table
    args = ["eval", str(custom_run), str(run_1v1), "--games", "2", "--game-seconds", "3", "--league", str(league)]
    assert main([*args, "--json", str(out)]) == 0
    assert json.loads(out.read_text())["games"] == 2
