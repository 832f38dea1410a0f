"""The rule bot on real RocketSim: it beats idle and random players; matches swap sides; it is deterministic."""

from __future__ import annotations

import numpy as np
import pytest

from speedflip.env import layout as L
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.selfplay.match import GameResult, match_env_config, play_match, summarize
from speedflip.selfplay.policies import IdlePolicy, RandomPolicy, ScriptedPolicy, resolve_policy
from speedflip.selfplay.rule_policy import RulePolicy


def _match(a: str, b: str, games: int, seconds: float, seed: int = 0) -> list[GameResult]:
    env = RocketLeagueVecEnv(match_env_config(games, 1, seconds), seed=seed)
    try:
        pa = resolve_policy(a, env.obs_dim, env.actions.table, seed=seed)
        pb = resolve_policy(b, env.obs_dim, env.actions.table, seed=seed + 1)
        return play_match(env, pa, pb, seconds)
    finally:
        env.close()


def test_rule_beats_idle() -> None:
    # 60 s games: at 30 s the rule bot scored in only 16-18 of 20 games over seeds 0-9, every miss from the
    # back-centre kickoff spot, where the idle car sits in its own goal mouth right on the rule bot's shot line.
    # RocketSim's results differ between CPUs: at 60 s, seeds 0-3 scored in 17/18/16/18 of 20 games on a
    # "Intel Xeon Processor" machine (all misses from the blue side), 18+ on an earlier one; 15 leaves that margin
    results = _match("rule", "idle", games=20, seconds=60.0)
    s = summarize(results)
    assert s.games == 20
    assert [r.a_is_blue for r in results] == [True] * 10 + [False] * 10  # sides swapped halfway
    scored = [r.goals_a >= 1 for r in results]
    assert sum(scored) >= 15, [(r.a_is_blue, r.goals_a, r.goals_b) for r in results]
    assert any(scored[:10]) and any(scored[10:])  # scores from both sides of the field
    assert s.losses == 0
    assert s.wins + s.draws + s.losses == 20
    assert s.goals_a >= 40 and s.goals_b <= 1  # a handful of goals per game, the idle car never attacks
    assert s.touches_a > s.touches_b
    assert s.score_rate >= 0.9 and s.interval_low > 0.7


def test_rule_beats_random() -> None:
    results = _match("rule", "random", games=20, seconds=30.0)
    s = summarize(results)
    assert {r.a_is_blue for r in results[:10]} == {True} and {r.a_is_blue for r in results[10:]} == {False}
    assert s.wins >= 12 and s.losses <= 1 and s.wins - s.losses >= 10, s
    assert s.goals_a >= 3 * max(s.goals_b, 1)
    assert s.interval_low > 0.5  # clearly better than a coin flip


def test_idle_vs_rule_mirrors_the_result() -> None:
    """Swapping A and B: the rule bot still wins; summarize counts from A's point of view."""
    results = _match("idle", "rule", games=4, seconds=30.0)
    s = summarize(results)
    assert s.wins == 0 and s.losses >= 2
    assert s.goals_a == 0 and s.goals_b >= 2
    assert s.score_rate == pytest.approx((s.wins + 0.5 * s.draws) / 4)


def test_summarize_by_hand() -> None:
    def game(k: int, ga: int, gb: int) -> GameResult:
        return GameResult(k, k < 2, ga, gb, 1, 2, 3, 4, 0, 1, 10.0)

    results = [game(0, 2, 1), game(1, 0, 0), game(2, 0, 3), game(3, 1, 0)]
    s = summarize(results)
    assert (s.games, s.wins, s.draws, s.losses) == (4, 2, 1, 1)
    assert s.score_rate == pytest.approx(2.5 / 4)  # 2 wins + half a draw
    assert (s.goals_a, s.goals_b) == (3, 4)
    assert (s.touches_a, s.touches_b, s.shots_a, s.shots_b, s.saves_a, s.saves_b) == (4, 8, 12, 16, 0, 4)
    assert results[1].score_a == 0.5 and results[2].as_dict()["score_a"] == 0.0
    assert s.distinct_games == 4
    assert (s.scoreless_a, s.scoreless_b) == (2, 2)  # A: the 0:0 and the 0:3; B: the 0:0 and the 1:0


def test_distinct_games_counts_replayed_games_once() -> None:
    """Records equal in everything but the game index count once; any other difference counts."""
    base = GameResult(0, True, 1, 0, 5, 3, 0, 0, 0, 0, 60.0)
    replays = [GameResult(k, True, 1, 0, 5, 3, 0, 0, 0, 0, 60.0) for k in range(1, 4)]
    other_side = GameResult(4, False, 1, 0, 5, 3, 0, 0, 0, 0, 60.0)
    one_more_touch = GameResult(5, True, 1, 0, 6, 3, 0, 0, 0, 0, 60.0)
    s = summarize([base, *replays, other_side, one_more_touch])
    assert (s.games, s.distinct_games) == (6, 3)


def test_deterministic_players_replay_games() -> None:
    """The rule bot against the idle car on real RocketSim: both deterministic, so 20 games hold few distinct
    ones (a game is fixed by its kickoff spot and side until the first goal, 5 spots x 2 sides; in 5 s the rule
    bot scores at most once). Measured: 6 distinct records."""
    s = summarize(_match("rule", "idle", games=20, seconds=5.0))
    assert 2 <= s.distinct_games <= 10, s


def test_rule_policy_is_deterministic_and_drives_at_the_ball() -> None:
    env = RocketLeagueVecEnv(match_env_config(8, 1, 10.0), seed=3)
    try:
        obs = env.reset()
        table = env.actions.table
        first = RulePolicy(table).act(env.state, env.car_teams)
        again = RulePolicy(table).act(env.state.copy(), env.car_teams)
        np.testing.assert_array_equal(first, again)
        assert first.shape == (env.num_agents,) and first.dtype == np.int64
        # at kickoff every car goes full throttle; one on the centre line facing the ball drives straight
        rows = table[first]
        assert np.all(rows[:, 0] == 1.0)
        cars = env.state.cars[:, np.arange(env.num_cars), env.car_teams].reshape(-1, L.CAR_WIDTH)
        centre = np.abs(cars[:, L.CAR_POS][:, 0]) < 1.0
        assert centre.any()  # seed 3 puts some cars on the back-centre spot
        assert np.all(rows[centre, 1] == 0.0) and np.all(rows[centre, 6] == 1.0)  # straight, boosting
        # it stays deterministic over a few steps of play (two identical envs, same actions)
        twin = RocketLeagueVecEnv(match_env_config(8, 1, 10.0), seed=3)
        try:
            twin.reset()
            rules = ScriptedPolicy(RulePolicy(table))
            for _ in range(20):
                a = rules.act(obs, env.state, env.car_teams)
                b = rules.act(obs, twin.state, twin.car_teams)
                np.testing.assert_array_equal(a, b)
                obs = env.step(a).obs
                twin.step(b)
        finally:
            twin.close()
    finally:
        env.close()


def test_rule_policy_rejects_a_table_without_its_rows() -> None:
    env = RocketLeagueVecEnv(match_env_config(2, 1, 10.0), seed=0)
    table = env.actions.table
    env.close()
    with pytest.raises(ValueError, match="lookup table lacks"):
        RulePolicy(table[table[:, 6] == 0.0])  # no boost rows


def test_builtin_policies() -> None:
    env = RocketLeagueVecEnv(match_env_config(2, 1, 10.0), seed=0)
    try:
        obs = env.reset()
        table = env.actions.table
        rule = resolve_policy("rule", env.obs_dim, table)
        assert isinstance(rule, ScriptedPolicy) and rule.name == "rule"
        idle = resolve_policy("idle", env.obs_dim, table)
        assert isinstance(idle, IdlePolicy) and idle.name == "idle"
        chosen = idle.act(obs, env.state, env.car_teams)
        assert chosen.shape == (4,) and np.all(table[chosen] == 0.0)  # the all-zero row: no input at all
        rnd = resolve_policy("random", env.obs_dim, table, seed=5)
        assert isinstance(rnd, RandomPolicy) and rnd.name == "random"
        draws = np.concatenate([rnd.act(obs, env.state, env.car_teams) for _ in range(200)])
        assert draws.min() >= 0 and draws.max() < table.shape[0]
        assert len(np.unique(draws)) > table.shape[0] // 2  # spread over the table
        # seeded: the same seed gives the same sequence, another seed another one
        r1 = resolve_policy("random", env.obs_dim, table, seed=5)
        r2 = resolve_policy("random", env.obs_dim, table, seed=5)
        r3 = resolve_policy("random", env.obs_dim, table, seed=6)
        seq1 = [r1.act(obs, env.state, env.car_teams) for _ in range(5)]
        seq2 = [r2.act(obs, env.state, env.car_teams) for _ in range(5)]
        seq3 = [r3.act(obs, env.state, env.car_teams) for _ in range(5)]
        np.testing.assert_array_equal(np.concatenate(seq1), np.concatenate(seq2))
        assert not np.array_equal(np.concatenate(seq1), np.concatenate(seq3))
    finally:
        env.close()
