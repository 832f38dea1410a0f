"""benchmarks/pick_study.py: the pick rules and statistics over a run's last milestones, answers computed by hand."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from benchmark_modules import load_benchmark
from speedflip.selfplay.league import append_games


@pytest.fixture
def pick_study() -> ModuleType:
    return load_benchmark("pick_study")


def rating_rows(step: int, elo: float, rule: float, idle: float, stage: str = "main") -> list[dict[str, object]]:
    """A milestone's rating games: one against each anchor and one against an earlier milestone (its Elo last)."""
    name = f"{stage}@{step}"
    return [
        {"step": step, "player_a": name, "player_b": "rule", "score_a": rule, "rating_a": elo - 10},
        {"step": step, "player_a": name, "player_b": "idle", "score_a": idle, "rating_a": elo - 5},
        {"step": step, "player_a": name, "player_b": "main@1", "score_a": 0.5, "rating_a": elo},
    ]


def make_run(tmp_path: Path, ship_margin: float = 0.1) -> Path:
    run = tmp_path / "run"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(f"selfplay:\n  ship_by: anchor_score\n  ship_margin: {ship_margin}\n")
    rows = [
        {"step": 500, "player_a": "learner", "player_b": "rule", "score_a": 1.0, "rating_a": 900},  # not a milestone
        *rating_rows(1000, 800, 0.5, 1.0),  # anchor score 0.75
        *rating_rows(2000, 900, 1.0, 1.0),  # 1.0: the stage's best
        *rating_rows(3000, 1100, 0.5, 1.0),  # 0.75 < 1.0 - 0.1: the rating keeps main@2000
        *rating_rows(4000, 950, 1.0, 0.5),  # 0.75 again
    ]
    append_games(run / "games.csv", rows)
    return run


def test_last_milestones_and_the_rating_pick(pick_study: ModuleType, tmp_path: Path) -> None:
    run = make_run(tmp_path)
    last = pick_study.last_milestones(run, 3)
    assert [m.name for m in last] == ["main@2000", "main@3000", "main@4000"]
    assert [m.elo for m in last] == [900, 1100, 950]  # the last row of each: its Elo after all its games
    assert [m.anchor_score for m in last] == [1.0, 0.75, 0.75]
    rated = pick_study.rated_milestones(run)
    # the rating's pick (R0): what best.json names at the end, by the run's ship_by and ship_margin
    assert pick_study.shipped_at(rated, run, 4000)["name"] == "main@2000"  # 0.75 is below 1.0 - 0.1
    wide = make_run(tmp_path / "wide", ship_margin=0.25)
    assert pick_study.shipped_at(rated, wide, 4000)["name"] == "main@4000"


def test_last_milestones_needs_rated_ones(pick_study: ModuleType, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(SystemExit, match="no rated milestone"):
        pick_study.last_milestones(run, 3)


def test_ranks_share_ties(pick_study: ModuleType) -> None:
    assert pick_study.ranks([0.3, 0.1, 0.3, 0.2]) == [3.5, 1.0, 3.5, 2.0]


def test_spearman_by_hand(pick_study: ModuleType) -> None:
    assert pick_study.spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert pick_study.spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    # ranks x 1,2,3,4 and y 2,1,4,3: d^2 = 1+1+1+1 = 4; rho = 1 - 6*4 / (4*15) = 0.6
    assert pick_study.spearman([1, 2, 3, 4], [5, 1, 9, 7]) == pytest.approx(0.6)
    assert pick_study.spearman([1, 2, 3], [5, 5, 5]) is None


def test_best_of_breaks_ties_for_the_newer(pick_study: ModuleType) -> None:
    names = ["main@1", "main@2", "main@3"]
    assert pick_study.best_of(names, {"main@1": 0.7, "main@2": 0.7, "main@3": 0.5}) == "main@2"
    assert pick_study.best_of(names, {"main@1": 0.9, "main@2": 0.7, "main@3": 0.5}) == "main@1"


def results(rates: dict[str, tuple[float, float]]) -> dict[str, dict[str, dict[str, float]]]:
    return {o: {"deterministic": {"win_rate": d}, "stochastic": {"win_rate": s}} for o, (d, s) in rates.items()}


def test_n4_and_s_by_hand(pick_study: ModuleType) -> None:
    r = results({
        "rule": (0.9, 0.7), "idle": (1.0, 0.8),
        "ball_chaser": (0.4, 0.6), "goalie": (1.0, 0.8), "bumper": (0.7, 0.9), "shadow": (1.0, 1.0),
    })  # fmt: skip
    n4, s = pick_study.n4_and_s(r)
    assert n4 == pytest.approx((0.4 + 0.6 + 1.0 + 0.8 + 0.7 + 0.9 + 1.0 + 1.0) / 8)  # 0.8
    assert s == pytest.approx((0.9 + 0.7 + 1.0 + 0.8) / 4)  # 0.85


def test_reused_files_of_the_shipped_and_the_newest_milestone(pick_study: ModuleType, tmp_path: Path) -> None:
    milestone = pick_study.BestMilestone
    shipped_4000 = milestone("milestones/main/4000", "main@4000", 4000, 1000.0, "main")
    newest_5000 = milestone("milestones/main/5000", "main@5000", 5000, 990.0, "main")
    older_3000 = milestone("milestones/main/3000", "main@3000", 3000, 980.0, "main")
    snap = {
        "agent_steps": 5000,
        "shipped": {"name": "main@4000", "agent_steps": 4000},
        "results": {"rule": {"deterministic": {"json": "/e/30min-rule-deterministic.json"}}},
        "shipped_results": {"rule": {"deterministic": {"json": "/e/shipped-30min-rule-deterministic.json"}}},
    }
    report = tmp_path / "skill_curve.json"
    report.write_text(json.dumps({"seeds": [{"snapshots": [snap]}]}))
    shipped_file = {("rule", "deterministic"): Path("/e/shipped-30min-rule-deterministic.json")}
    newest_file = {("rule", "deterministic"): Path("/e/30min-rule-deterministic.json")}
    assert pick_study.reused_files(report, shipped_4000) == shipped_file
    assert pick_study.reused_files(report, newest_5000) == newest_file  # the newest checkpoint: its step's weights
    assert pick_study.reused_files(report, older_3000) == {}
    assert pick_study.reused_files(None, shipped_4000) == {}
    # the newest checkpoint was the shipped bot: skill_curve played it once, under "results"
    snap.update({"agent_steps": 4000, "shipped_results": None})
    report.write_text(json.dumps({"seeds": [{"snapshots": [snap]}]}))
    assert pick_study.reused_files(report, shipped_4000) == newest_file


def test_parse_args_names_the_problem(
    pick_study: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path)
    with pytest.raises(SystemExit):
        pick_study.parse_args([str(run), "--out", "x.json", "--games", "99"])
    assert "--games 99: give an even count" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        pick_study.parse_args([str(tmp_path / "nothing"), "--out", "x.json"])
    assert "is not a run directory with games.csv" in capsys.readouterr().err
    assert pick_study.parse_args([str(run), "--out", "x.json"]).milestones == 6
