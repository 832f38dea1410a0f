"""Matchmaker: which rows the learner drives, opponents' actions, rating finished pool games."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from speedflip.checkpoint import list_checkpoints
from speedflip.config import EnvConfig, SelfPlayConfig
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.selfplay import elo
from speedflip.selfplay.matchmaker import LEARNER, Matchmaker
from speedflip.selfplay.policies import NeuralPolicy
from speedflip.selfplay.rule_policy import RulePolicy


@pytest.fixture
def env() -> Iterator[RocketLeagueVecEnv]:
    e = RocketLeagueVecEnv(EnvConfig(num_arenas=4, state_setters={"kickoff": 1.0}), seed=2)
    e.reset()
    yield e
    e.close()


def _matchmaker(env: RocketLeagueVecEnv, run_dir: Path | None = None, **cfg: object) -> Matchmaker:
    sp = SelfPlayConfig(opponent_share=0.5, k_factor=16.0, **cfg)  # type: ignore[arg-type]
    mm = Matchmaker(sp, 0.5, env.num_arenas, env.car_teams, env.actions.table, env.obs_dim, run_dir, seed=0)
    mm.sample(np.arange(env.num_arenas))  # as the Trainer does once the pool is loaded
    return mm


def _neutral(env: RocketLeagueVecEnv) -> int:
    return int(np.flatnonzero(np.all(env.actions.table == 0.0, axis=1))[0])


def _done(arena: int, num_arenas: int = 4, cars: int = 2) -> np.ndarray:
    flags = np.zeros(num_arenas * cars, bool)
    flags[arena * cars : (arena + 1) * cars] = True
    return flags


def test_learner_rows(env: RocketLeagueVecEnv) -> None:
    mm = _matchmaker(env)
    # round(0.5 * 4) = 2 pool arenas: 0 and 1
    assert mm.pool_arenas == 2
    # rows k*2 + c: arena 0 learner blue (row 0), arena 1 learner orange (row 3), arenas 2 and 3 both cars
    np.testing.assert_array_equal(mm.learner_rows, [True, False, False, True, True, True, True, True])
    np.testing.assert_array_equal(mm.learner_cols, [0, 3, 4, 5, 6, 7])
    np.testing.assert_array_equal(mm.learner_team[:2], [0, 1])
    # no pool: the learner drives everything
    none = Matchmaker(SelfPlayConfig(), 0.0, 4, env.car_teams, env.actions.table, env.obs_dim, None, seed=0)
    assert none.pool_arenas == 0 and none.learner_rows.all()
    # every arena in the pool with 3 arenas: round(1.0 * 3) = 3, learner blue/orange/blue
    cars = np.array([0, 0, 1, 1])  # 2v2
    full = Matchmaker(SelfPlayConfig(), 1.0, 3, cars, env.actions.table, env.obs_dim, None, seed=0)
    np.testing.assert_array_equal(full.learner_rows.reshape(3, 4), [[1, 1, 0, 0], [0, 0, 1, 1], [1, 1, 0, 0]])


def test_fill_opponent_actions_replaces_exactly_the_opponent_rows(env: RocketLeagueVecEnv) -> None:
    mm = _matchmaker(env)  # include_rule: the pool is just the rule bot
    assert [m.name for m in mm.members] == ["rule"]
    np.testing.assert_array_equal(mm.opponent[:2], [0, 0])
    neutral = _neutral(env)  # the rule bot never picks the no-input row (it always drives)
    actions = np.full(env.num_agents, neutral, np.int64)
    obs = env.obs.copy()
    out = mm.fill_opponent_actions(actions, obs, env.state)
    rule = RulePolicy(env.actions.table).act(env.state, env.car_teams)
    np.testing.assert_array_equal(np.flatnonzero(out != actions), [1, 2])  # orange in arena 0, blue in arena 1
    np.testing.assert_array_equal(out[[1, 2]], rule[[1, 2]])
    np.testing.assert_array_equal(actions, neutral)  # the input is not modified
    with pytest.raises(RuntimeError, match="needs the arena state"):
        mm.fill_opponent_actions(actions, obs, None)


def test_noisy_rule_bot_holds_random_rows_for_their_excursions(env: RocketLeagueVecEnv) -> None:
    """selfplay.rule_noise: the rule bot's rows, except on excursions, where one random row is held for
    rule_noise_hold_steps env steps; the learner's rows and the kickstart labels passed in are untouched."""
    hold = 3
    mm = _matchmaker(env, rule_noise=0.5, rule_noise_hold_steps=hold)
    neutral = _neutral(env)
    rule = RulePolicy(env.actions.table).act(env.state, env.car_teams)
    labels = rule.copy()
    noisy_steps, starts, steps = 0, 0, 400
    for _ in range(steps):
        before = mm.noise_steps_left[[1, 2]].copy()
        actions = np.full(env.num_agents, neutral, np.int64)
        out = mm.fill_opponent_actions(actions, env.obs, env.state, rule_actions=labels)
        after = mm.noise_steps_left[[1, 2]]
        np.testing.assert_array_equal(labels, rule)  # the labels given are not modified
        np.testing.assert_array_equal(np.delete(out, [1, 2]), neutral)  # the learner's rows stay the learner's
        # on an excursion (one going on, or one that starts now: hold - 1 steps left after it) the excursion's row
        # is played and one step is used up; off one, the rule bot's own row
        on = (before > 0) | (after == hold - 1)
        np.testing.assert_array_equal(out[[1, 2]], np.where(on, mm.noise_row[[1, 2]], rule[[1, 2]]))
        np.testing.assert_array_equal(after, np.where(before > 0, before - 1, np.where(on, hold - 1, 0)))
        noisy_steps += int(on.sum())
        starts += int(((before == 0) & on).sum())
    # p = 0.5 / (3 * 0.5 + 0.5) = 0.25 per step off an excursion; the noisy share is rule_noise, so half of the
    # 2 x 400 steps in excursions of 3: about 133 of them (sd ~ 8)
    assert 100 < starts < 170
    assert noisy_steps / (2 * steps) == pytest.approx(0.5, abs=0.1)
    # a game that ends cuts its excursions short
    mm.noise_steps_left[[1, 2]] = 2
    mm.on_step(_done(0), np.zeros(8, bool), np.array([-1, -1, -1, -1]), global_step=1)
    np.testing.assert_array_equal(mm.noise_steps_left[[1, 2]], [0, 2])


def test_rule_noise_needs_the_rule_bot_and_a_share_below_one() -> None:
    with pytest.raises(ValueError, match=r"rule_noise=0\.2 needs the rule bot"):
        SelfPlayConfig(rule_noise=0.2, include_rule=False)
    with pytest.raises(ValueError, match="less than 1"):
        SelfPlayConfig(rule_noise=1.0)


def test_empty_pool_falls_back_to_self_play(env: RocketLeagueVecEnv) -> None:
    mm = _matchmaker(env, include_rule=False)
    assert mm.members == [] and mm.pool_arenas == 2
    np.testing.assert_array_equal(mm.opponent[:2], [-1, -1])
    actions = np.arange(env.num_agents, dtype=np.int64)
    np.testing.assert_array_equal(mm.fill_opponent_actions(actions, env.obs, env.state), actions)
    goal = np.array([0, 0, -1, -1])
    mm.on_step(_done(0) | _done(1), np.zeros(8, bool), goal, global_step=10)
    assert mm.recent == [] and mm._pending_games == []  # nobody to rate
    assert mm.learner_elo == 1000.0


def test_on_step_rates_wins_losses_and_draws_vs_rule(env: RocketLeagueVecEnv, tmp_path: Path) -> None:
    mm = _matchmaker(env, run_dir=tmp_path)
    no = np.zeros(8, bool)
    # arena 0 (learner blue): blue scores -> learner win. K=16: 1000 + 16 * (1 - 0.5) = 1008; rule fixed
    mm.on_step(_done(0), no, np.array([0, -1, -1, -1]), global_step=100)
    assert mm.learner_elo == pytest.approx(1008.0)
    assert mm.league.player("rule").rating == 1000.0
    # arena 1 (learner orange): blue scores -> loss. E = 1/(1+10^(-8/400)) = 0.5115100
    #   1008 + 16 * (0 - 0.5115100) = 999.8158400
    mm.on_step(_done(1), no, np.array([-1, 0, -1, -1]), global_step=200)
    assert mm.learner_elo == pytest.approx(999.81584, abs=1e-4)
    # arena 0 truncated (no goal) -> draw: E = 1/(1+10^(0.18416/400)) = 0.4997350
    #   999.81584 + 16 * (0.5 - 0.4997350) = 999.8200800
    mm.on_step(no, _done(0), np.array([-1, -1, -1, -1]), global_step=300)
    assert mm.learner_elo == pytest.approx(999.82008, abs=1e-4)
    assert mm.learner_elo == pytest.approx(elo.update(elo.update(1008.0, 1000.0, 0.0, 16.0)[0], 1000.0, 0.5, 16.0)[0])
    # self-play arenas (2, 3) finishing are not rated
    mm.on_step(_done(2) | _done(3), no, np.array([-1, -1, 0, 1]), global_step=400)
    assert mm.recent == [1.0, 0.0, 0.5]
    m = mm.metrics()
    assert m["selfplay/winrate_vs_pool"] == pytest.approx(1 / 3)
    assert m["selfplay/score_rate_vs_pool"] == pytest.approx(0.5)
    assert m["selfplay/pool_size"] == 1.0 and m["selfplay/learner_elo"] == mm.learner_elo
    assert mm.recent_win_rate() is None  # fewer than 20 games

    mm.flush()
    with (tmp_path / "games.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    got = [(r["step"], r["player_a"], r["player_b"], r["goals_a"], r["goals_b"], r["score_a"], r["a_is_blue"])
           for r in rows]  # fmt: skip
    assert got == [
        ("100", LEARNER, "rule", "1", "0", "1.0", "True"),
        ("200", LEARNER, "rule", "0", "1", "0.0", "False"),
        ("300", LEARNER, "rule", "0", "0", "0.5", "True"),
    ]
    league = json.loads((tmp_path / "league.json").read_text())
    assert league["players"][LEARNER]["rating"] == pytest.approx(mm.learner_elo)
    assert league["players"][LEARNER]["games"] == 3 and league["k_factor"] == 16.0
    mm.flush()  # nothing pending: no duplicate rows
    assert (tmp_path / "games.csv").read_text().count("\n") == 4


def test_games_csv_logs_each_games_length_in_game_seconds(env: RocketLeagueVecEnv, tmp_path: Path) -> None:
    sp = SelfPlayConfig(opponent_share=0.5)
    # tick_skip 8: one env step is 8 / 120 s of game
    table, obs_dim = env.actions.table, env.obs_dim
    mm = Matchmaker(sp, 0.5, 4, env.car_teams, table, obs_dim, tmp_path, seed=0, step_seconds=8 / 120)
    mm.sample(np.arange(4))
    no, none = np.zeros(8, bool), np.array([-1, -1, -1, -1])
    for step in range(899):  # 899 steps in which no arena ends
        mm.on_step(no, no, none, global_step=step)
    mm.on_step(_done(0), no, np.array([0, -1, -1, -1]), global_step=899)  # arena 0: a goal on step 900 = 60 s
    for step in range(150):
        mm.on_step(no, no, none, global_step=900 + step)
    # arena 0 restarted after its goal: 151 steps later it times out (10.0667 s); arena 1 ran all 1051 (70.0667 s)
    mm.on_step(_done(0), _done(1), none, global_step=1050)
    mm.on_step(_done(1), no, np.array([-1, 1, -1, -1]), global_step=1051)  # arena 1 again, after 1 step
    mm.flush()
    with (tmp_path / "games.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["step"], r["score_a"], float(r["seconds"])) for r in rows] == [
        ("899", "1.0", 60.0),
        ("1050", "0.5", round(151 * 8 / 120, 4)),  # logged to 0.1 ms
        ("1050", "0.5", round(1051 * 8 / 120, 4)),
        ("1051", "1.0", round(8 / 120, 4)),
    ]
    # without step_seconds the column stays empty (as for games written before it existed)
    plain = Matchmaker(sp, 0.5, 4, env.car_teams, table, obs_dim, tmp_path / "plain", seed=0)
    (tmp_path / "plain").mkdir()
    plain.sample(np.arange(4))
    plain.on_step(_done(0), no, np.array([0, -1, -1, -1]), global_step=1)
    plain.flush()
    with (tmp_path / "plain" / "games.csv").open(newline="") as f:
        assert [r["seconds"] for r in csv.DictReader(f)] == [""]


def test_snapshot_opponent_is_rated_zero_sum(env: RocketLeagueVecEnv, run_1v1: Path) -> None:
    mm = _matchmaker(env, include_rule=False)
    ckpt = list_checkpoints(run_1v1 / "checkpoints")[-1]
    mm.add_snapshot(ckpt)
    name = f"checkpoints@{int(ckpt.name)}"
    assert [m.name for m in mm.members] == [name]
    mm.add_snapshot(ckpt)  # the same snapshot twice is one member
    assert len(mm.members) == 1
    np.testing.assert_array_equal(mm.opponent, [-1, -1, -1, -1])  # drawn when the pool was still empty
    mm.sample(np.arange(4))
    np.testing.assert_array_equal(mm.opponent, [0, 0, -1, -1])  # only pool arenas draw opponents
    # the neural opponent acts without the arena state
    actions = np.full(env.num_agents, _neutral(env), np.int64)
    out = mm.fill_opponent_actions(actions, env.obs, None)
    assert isinstance(mm._policies[name], NeuralPolicy)
    changed = np.flatnonzero(out != actions)
    assert set(changed.tolist()) <= {1, 2}
    np.testing.assert_array_equal(out[[0, 3, 4, 5, 6, 7]], actions[[0, 3, 4, 5, 6, 7]])
    # arena 1, learner orange, orange scores: a win. K=16, both at 1000 -> +8 / -8
    mm.on_step(_done(1), np.zeros(8, bool), np.array([-1, 1, -1, -1]), global_step=5)
    assert mm.learner_elo == pytest.approx(1008.0)
    assert mm.league.player(name).rating == pytest.approx(992.0)
    assert mm.members[0].elo == pytest.approx(992.0)  # refreshed when the arena draws its next opponent


def test_snapshot_with_another_obs_size_is_not_used(env: RocketLeagueVecEnv, run_2v2: Path) -> None:
    mm = _matchmaker(env, include_rule=False)
    mm.add_snapshot(list_checkpoints(run_2v2 / "checkpoints")[-1])
    assert mm.members == []
    assert any("another observation size" in n for n in mm.notes)


def test_sampling_follows_the_strategy(env: RocketLeagueVecEnv) -> None:
    """elo_weighted with a tiny window never draws a member rated far from the learner."""
    from speedflip.selfplay.pool import Member

    mm = _matchmaker(env, include_rule=False, elo_window=50.0)
    mm.members = [Member("near", "x", 1, 1010.0), Member("far", "y", 2, 1300.0)]
    mm.league.player("near").rating = 1010.0
    mm.league.player("far").rating = 1300.0
    for _ in range(50):
        mm.sample(np.arange(4))
        np.testing.assert_array_equal(mm.opponent[:2], [0, 0])


def test_rule_share_draws_the_rule_bot_that_often(env: RocketLeagueVecEnv) -> None:
    """With the learner's milestones nearer its rating, elo_weighted alone almost never draws the rule
    bot; selfplay.rule_share=0.5 makes it half of the pool games."""
    from speedflip.selfplay.pool import Member

    def rule_fraction(**cfg: object) -> float:
        mm = _matchmaker(env, **cfg)
        assert mm.members[0].path is None  # the rule bot
        mm.members += [Member("m1", "x", 1, 700.0), Member("m2", "y", 2, 710.0)]
        for name in ("m1", "m2"):
            mm.league.player(name).rating = 700.0
        mm.league.player(LEARNER).rating = 700.0
        draws = []
        for _ in range(400):
            mm.sample(np.arange(4))
            draws.extend(mm.opponent[:2].tolist())
        return draws.count(0) / len(draws)

    # gap 300 to the rule bot (1000): weight exp(-3) = 0.05 against about 1 and 0.9 for the milestones
    assert rule_fraction() < 0.06
    assert rule_fraction(rule_share=0.5) == pytest.approx(0.5, abs=0.05)  # 800 draws: sd 0.018


def test_rule_share_without_the_rule_bot_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="include_rule=true"):
        SelfPlayConfig(rule_share=0.3, include_rule=False)


def test_idle_share_puts_the_idle_car_in_the_pool_and_draws_it_that_often(env: RocketLeagueVecEnv) -> None:
    """selfplay.idle_share=0.25 with rule_share=0.75 and no milestone yet: the pool is the rule bot and
    the idle car, drawn 3 : 1; the idle car drives its cars with the all-zero row."""
    assert [m.name for m in _matchmaker(env).members] == ["rule"]  # idle_share 0: no idle car
    mm = _matchmaker(env, rule_share=0.75, idle_share=0.25)
    assert [(m.name, m.path) for m in mm.members] == [("rule", None), ("idle", None)]
    draws = []
    for _ in range(400):
        mm.sample(np.arange(4))
        draws.extend(mm.opponent[:2].tolist())
    assert draws.count(1) / len(draws) == pytest.approx(0.25, abs=0.05)  # 800 draws: sd 0.015
    assert set(mm.opponent[2:].tolist()) == {-1}  # self-play arenas have no opponent
    mm.opponent[:2] = 1  # both pool arenas against the idle car
    learner_choice = np.full(env.num_agents, 3, np.int64)
    out = mm.fill_opponent_actions(learner_choice, np.zeros((env.num_agents, env.obs_dim), np.float32), None)
    # rows: arena 0 learner blue (row 0) / idle orange (row 1), arena 1 idle blue (row 2) / learner orange (row 3)
    np.testing.assert_array_equal(out, [3, _neutral(env), _neutral(env), 3, 3, 3, 3, 3])


def test_games_against_the_idle_car_are_rated_and_leave_its_rating_fixed(env: RocketLeagueVecEnv) -> None:
    mm = _matchmaker(env, rule_share=0.0, idle_share=1.0)
    mm.opponent[:2] = 1
    before = mm.learner_elo
    goal_team = np.array([1, -1, -1, -1])  # arena 0: orange (the idle car) scored, the learner's own goal
    mm.on_step(_done(0), np.zeros(8, bool), goal_team, global_step=100)
    # K=16: the learner (1000) was expected to score 1 / (1 + 10 ** (-530 / 400)) = 1 / 1.047315 = 0.954823; it lost
    assert mm.learner_elo == pytest.approx(before - 16 * 0.954823, abs=1e-4)
    assert mm.league.player("idle").rating == 470.0
    game = mm.take_pending_games()[0]
    assert (game["player_b"], game["score_a"], game["a_is_blue"]) == ("idle", 0.0, True)


def test_rule_and_idle_shares_above_one_are_a_config_error() -> None:
    with pytest.raises(ValueError, match=r"rule_share=0\.9 and idle_share=0\.2 add up to more than all pool games"):
        SelfPlayConfig(rule_share=0.9, idle_share=0.2)
    SelfPlayConfig(rule_share=0.8, idle_share=0.2)  # exactly 1 is fine


def test_snapshots_act_in_one_stacked_pass_and_the_rule_bot_alone(
    env: RocketLeagueVecEnv, run_1v1: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from speedflip.selfplay.stacked import StackedPolicies

    ckpt = list_checkpoints(run_1v1 / "checkpoints")[-1]
    mm = _matchmaker(env)  # the rule bot is member 0
    for name in ("a", "b"):
        shutil.copytree(ckpt, tmp_path / name / ckpt.name)
        mm.add_snapshot(tmp_path / name / ckpt.name)
    assert [m.name for m in mm.members] == ["rule", f"a@{ckpt.name}", f"b@{ckpt.name}"]
    calls: list[np.ndarray] = []

    def fake_act(self: StackedPolicies, obs: np.ndarray, members: np.ndarray) -> np.ndarray:
        calls.append(members)
        return np.asarray(members) + 100  # each row's slot in the stack, recognisable

    monkeypatch.setattr(StackedPolicies, "act", fake_act)
    actions = np.full(env.num_agents, _neutral(env), np.int64)
    mm.opponent[:2] = [2, 1]  # arena 0 (orange opponent, row 1) plays b, arena 1 (blue, row 2) plays a
    out = mm.fill_opponent_actions(actions, env.obs, env.state)
    assert len(calls) == 1  # one batched pass for both snapshots
    np.testing.assert_array_equal(out[[1, 2]], [101, 100])  # b is slot 1, a slot 0
    np.testing.assert_array_equal(out[[0, 3, 4, 5, 6, 7]], actions[[0, 3, 4, 5, 6, 7]])
    mm.opponent[:2] = [0, 1]  # the rule bot acts on its own rows
    out = mm.fill_opponent_actions(actions, env.obs, env.state)
    rule = RulePolicy(env.actions.table).act(env.state, env.car_teams)
    assert out[1] == rule[1] and out[2] == 100
