"""benchmarks/skill_curve.py: which policies a seed's evaluation plays (no games played)."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from benchmark_modules import load_benchmark


@pytest.fixture
def skill_curve() -> ModuleType:
    return load_benchmark("skill_curve")


def test_a_policy_is_evaluated_once_whether_newest_or_shipped(
    skill_curve: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # snapshots at 2M (shipped: the 1M milestone), 4M (shipped: the 2M milestone) and the final 6M (shipped: 6M)
    shipped_by_step = {2_000_000: 1_000_000, 4_000_000: 2_000_000, 6_000_000: 6_000_000}
    played: list[tuple[int, bool, int]] = []

    def shipped_at(rated: object, run_dir: Path, agent_steps: int) -> dict[str, Any]:
        step = shipped_by_step[agent_steps]
        return {"name": f"main@{step}", "agent_steps": step, "elo": 1000.0, "path": str(run_dir / str(step))}

    def evaluate_snapshot(snap: dict[str, Any], games: int, *rest: object, shipped: bool = False) -> dict[str, Any]:
        step = snap["shipped"]["agent_steps"] if shipped else snap["agent_steps"]
        played.append((step, shipped, games))
        snap["shipped_results" if shipped else "results"] = {"rule": {"deterministic": {"win_rate": step / 1e7}}}
        return snap["shipped_results" if shipped else "results"]

    monkeypatch.setattr(skill_curve, "rated_milestones", lambda run_dir: [])
    monkeypatch.setattr(skill_curve, "shipped_at", shipped_at)
    monkeypatch.setattr(skill_curve, "evaluate_snapshot", evaluate_snapshot)
    monkeypatch.setattr(skill_curve, "check_best_file", lambda run_dir, snap: None)
    snapshots = [
        {"seed": 1, "minute": minute, "agent_steps": step, "path": f"ckpt{step}", "final": minute == 30}
        for minute, step in ((10, 2_000_000), (20, 4_000_000), (30, 6_000_000))
    ]
    result = {"run_dir": str(tmp_path), "snapshots": snapshots}
    args = argparse.Namespace(games=40, games_final=100)
    skill_curve.evaluate_seed(result, args, tmp_path, lambda: None)
    # 2M newest, 1M shipped, 4M newest, the 2M milestone again (40 games, as before: reused), 6M once
    assert played == [(2_000_000, False, 40), (1_000_000, True, 40), (4_000_000, False, 40), (6_000_000, False, 100)]
    final = snapshots[-1]
    assert final["shipped_results"] is final["results"]  # the final policy is the shipped bot: the same games
    assert snapshots[1]["shipped_results"] is snapshots[0]["results"]


def test_the_clock_or_a_step_count_ends_the_run(skill_curve: ModuleType) -> None:
    timed = skill_curve.parse_args(["--minutes", "30", "--set", "ppo.learning_rate=1e-4"])
    sets = skill_curve.train_settings(timed, 2)
    assert sets == [
        "run.seed=2", "run.checkpoint_interval_steps=250000", f"run.total_steps={skill_curve.NO_LIMIT_STEPS}",
        "run.time_budget_minutes=30.0", "ppo.learning_rate=1e-4",
    ]  # fmt: skip
    by_steps = skill_curve.parse_args(["--steps", "22437888", "--minutes", "50"])
    assert "run.total_steps=22437888" in skill_curve.train_settings(by_steps, 1)
    assert "run.time_budget_minutes=50.0" in skill_curve.train_settings(by_steps, 1)  # the cap stays
    with pytest.raises(SystemExit):
        skill_curve.parse_args(["--steps", "0"])


def _result(wins: int, draws: int, own_goals: int = 0) -> dict[str, Any]:
    losses = 100 - wins - draws
    return {
        "wins": wins, "draws": draws, "losses": losses, "win_rate": wins / 100, "score_rate": (wins + draws / 2) / 100,
        "goals_for": 3 * wins, "goals_against": losses + own_goals, "own_goals_against": own_goals,
    }  # fmt: skip


def test_the_run_score_and_the_target_clauses_by_hand(skill_curve: ModuleType) -> None:
    results = {
        "rule": {"deterministic": _result(68, 20), "stochastic": _result(87, 10)},
        "idle": {"deterministic": _result(99, 1), "stochastic": _result(99, 1, own_goals=2)},
    }
    # (0.68 + 0.87 + 0.99 + 0.99) / 4
    assert skill_curve.run_score(results) == pytest.approx(0.8825)
    assert skill_curve.target_clauses(results) == {
        "rule exported": False, "idle exported": True, "no own goal vs idle exported": True,
        "rule sampled": True, "idle sampled": True, "no own goal vs idle sampled": False,
    }  # fmt: skip
    # a mode not played: no score, its clauses unknown (None), not failed
    exported_only = {o: {"deterministic": r["deterministic"]} for o, r in results.items()}
    assert skill_curve.run_score(exported_only) is None
    assert skill_curve.target_clauses(exported_only)["rule sampled"] is None


def test_the_target_table_reads_the_shipped_bot_at_the_last_snapshot(skill_curve: ModuleType) -> None:
    newest = {"rule": {"deterministic": _result(10, 0)}, "idle": {"deterministic": _result(10, 0)}}
    shipped = {"rule": {"deterministic": _result(70, 30)}, "idle": {"deterministic": _result(95, 5, own_goals=1)}}
    report = {
        "config": {"opponents": ["rule", "idle"], "also_stochastic": False},
        "seeds": [{"seed": 4, "snapshots": [
            {"minute": 10, "agent_steps": 5_000_000, "results": newest},
            {"minute": 30, "agent_steps": 15_000_000, "results": newest, "shipped_results": shipped,
             "shipped": {"name": "main@14000000"}},
        ]}],
    }  # fmt: skip
    rows = [line for line in skill_curve.target_table(report).splitlines() if line.startswith("| 4 ")]
    assert rows == [
        "| 4 | 15,000,000 | main@14000000 | exported | 70 / 30 / 0 (210:0, 0) | 95 / 5 / 0 (285:1, 1) | - | 2 of 3 |"
    ]


def test_every_eval_only_opponent_is_played_by_default_and_exists(skill_curve: ModuleType) -> None:
    """Each name skill_curve plays as an eval-only bot is a function of eval_opponents.py, given as a user bot."""
    opponents = load_benchmark("eval_opponents")
    assert {"ball_chaser", "goalie", "bumper", "shadow"} == skill_curve.SCRIPTED
    assert set(skill_curve.DEFAULT_OPPONENTS) >= skill_curve.SCRIPTED
    for name in skill_curve.SCRIPTED:
        assert callable(getattr(opponents, name))
        assert skill_curve.opponent_spec(name) == f"py:{skill_curve.EVAL_OPPONENTS_FILE}:{name}"
    assert skill_curve.opponent_spec("rule") == "rule"


def test_an_eval_record_keeps_both_sides_apart(skill_curve: ModuleType) -> None:
    """Player a of ``speedflip eval`` is the bot: its goals, shots and touches are the bot's ("for"), b's are the
    opponent's ("against"); own goals are split by whose last touch it was."""
    summary = {
        "games": 100, "wins": 58, "draws": 23, "losses": 19, "win_rate": 0.58, "score_rate": 0.695,
        "interval_low": 0.6, "interval_high": 0.78, "goals_a": 83, "goals_b": 31, "own_goals_a": 0, "own_goals_b": 42,
        "shots_a": 1, "shots_b": 21, "touches_a": 1335, "touches_b": 1146, "distinct_games": 23,
        "action_mode": "deterministic",
    }  # fmt: skip
    record = skill_curve.eval_record(summary, "deterministic", 12.34, Path("e.json"))
    assert (record["wins"], record["draws"], record["losses"]) == (58, 23, 19)
    assert (record["goals_for"], record["goals_against"]) == (83, 31)
    assert (record["shots_for"], record["shots_against"]) == (1, 21)
    assert (record["touches_for"], record["touches_against"]) == (1335, 1146)
    # 42 of the bot's 83 goals came off the opponent's own last touch; none of the 31 it conceded off its own
    assert (record["opponent_own_goals"], record["own_goals_against"]) == (42, 0)
    assert record["score_rate_95ci"] == [0.6, 0.78]
    assert (record["eval_seconds"], record["json"]) == (12.3, "e.json")
