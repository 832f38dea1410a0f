"""benchmarks/learner_score.py: the learner's training score from games.csv, answers computed by hand."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from benchmark_modules import load_benchmark
from speedflip.selfplay.league import append_games


@pytest.fixture
def learner_score() -> ModuleType:
    return load_benchmark("learner_score")


def game(step: int, b: str, score_a: float, a: str = "learner") -> dict[str, object]:
    return {"time": "t", "step": step, "player_a": a, "player_b": b, "team_size": 1, "score_a": score_a}


def make_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    append_games(run / "games.csv", [
        game(1_000_000, "rule", 0.0),  # before 5M: only in the first bin
        game(5_000_000, "rule", 1.0),
        game(5_500_000, "rule", 0.5),
        game(6_000_000, "rule", 1.0),
        game(6_500_000, "rule", 0.0),
        game(6_000_000, "idle", 1.0),  # another opponent
        game(6_000_000, "rule", 0.0, a="main@5000000"),  # a milestone's rating game, not the learner's
    ])  # fmt: skip
    records = [
        {"global_step": 4_000_000, "charts/goals_per_minute": 9.0, "charts/learning_rate": 2e-4,
         "losses/approx_kl": 0.5, "losses/entropy": 3.0},
        {"global_step": 5_000_000, "charts/goals_per_minute": 1.0, "charts/learning_rate": 1e-4,
         "losses/approx_kl": 0.004, "losses/entropy": 1.0},
        {"global_step": 6_000_000, "losses/approx_kl": 0.001},
        {"global_step": 7_000_000, "charts/goals_per_minute": 2.0, "charts/learning_rate": 5e-5,
         "losses/approx_kl": 0.002, "losses/entropy": 0.75},
    ]  # fmt: skip
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run


def test_the_score_counts_the_learners_games_from_the_step_on(learner_score: ModuleType, tmp_path: Path) -> None:
    r = learner_score.learner_score(make_run(tmp_path))
    # from 5M: 1, 0.5, 1, 0 -> mean 0.625; sample variance (0.140625 + 0.015625 + 0.140625 + 0.390625) / 3
    # = 0.229167, stderr sqrt(0.229167 / 4) = 0.239357
    assert r.games == 4 and r.score == pytest.approx(0.625) and r.stderr == pytest.approx(0.239357, abs=1e-6)
    # 2M bins: [0, 2M) holds 0.0; [4M, 6M) holds 1, 0.5 -> 0.75; [6M, 8M) holds 1, 0 -> 0.5
    assert r.bins == [(0, 0.0, 1), (4_000_000, 0.75, 2), (6_000_000, 0.5, 2)]
    assert r.goals_per_minute == pytest.approx(1.5)  # (1 + 2) / 2: the record at 4M is before the span
    assert (r.learning_rate_first, r.learning_rate_last, r.steps) == (2e-4, 5e-5, 7_000_000)
    # KL from 5M: 0.004, 0.001, 0.002 -> median 0.002 (0.5 at 4M is before the span); the last entropy 0.75
    assert r.update_kl_median == pytest.approx(0.002) and r.entropy_last == 0.75
    early = learner_score.learner_score(tmp_path / "run", from_steps=0)
    assert early.update_kl_median == pytest.approx((0.002 + 0.004) / 2)  # 0.001, 0.002, 0.004, 0.5: the middle two
    idle = learner_score.learner_score(tmp_path / "run", opponent="idle", from_steps=0)
    assert (idle.games, idle.score, idle.stderr) == (1, 1.0, None)


def test_the_within_shares_count_the_games_decided_inside_the_clock(
    learner_score: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path)  # four games from 5M without a length: not timed
    append_games(run / "games.csv", [
        {**game(5_100_000, "rule", 1.0), "seconds": 12.5},  # won inside the minute
        {**game(5_200_000, "rule", 1.0), "seconds": 75.0},  # won, but after 60 s: a 0:0 at the evaluation's clock
        {**game(5_300_000, "rule", 0.0), "seconds": 60.0},  # lost at 60 s exactly: inside
        {**game(5_400_000, "rule", 0.5), "seconds": 30.0},  # a draw (no-touch timeout)
        {**game(4_900_000, "rule", 1.0), "seconds": 5.0},  # before the span
        {**game(5_500_000, "idle", 1.0), "seconds": 5.0},  # another opponent
        {**game(5_600_000, "rule", 1.0), "seconds": 60.0, "touches_a": 9},  # a periodic evaluation game: left out
    ])  # fmt: skip
    r = learner_score.learner_score(run)
    # timed from 5M against rule: 4 games; won within 60 s: 1 of 4; decided within 60 s: 2 of 4
    assert (r.timed_games, r.won_within, r.goal_within) == (4, 0.25, 0.5)
    assert r.games == 8  # the score still counts every game of the span
    longer = learner_score.learner_score(run, game_seconds=80.0)
    assert (longer.won_within, longer.goal_within) == (0.5, 0.75)
    (tmp_path / "old").mkdir()
    assert learner_score.learner_score(make_run(tmp_path / "old")).won_within is None  # no lengths logged
    assert learner_score.main([str(run), "--from-steps", "5000000"]) == 0
    assert "of 4 games with their length: won by a goal within 60 s 0.250, any goal within 60 s 0.500" in (
        capsys.readouterr().out
    )


def test_main_prints_writes_json_and_refuses_what_is_not_a_run(
    learner_score: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path)
    out = tmp_path / "r.json"
    assert learner_score.main([str(run), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "0.625 +-0.239 (4 games)" in printed and "update KL median 0.002, last entropy 0.75" in printed
    assert json.loads(out.read_text())[0]["score"] == pytest.approx(0.625)
    assert learner_score.main([str(tmp_path / "nothing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    other = tmp_path / "other"
    other.mkdir()
    (other / "games.csv").write_text("a,b\n1,2\n")
    assert learner_score.main([str(other)]) == 2
    assert "not a speedflip games.csv" in capsys.readouterr().err


def test_the_plot_is_a_png(learner_score: ModuleType, tmp_path: Path) -> None:
    png = tmp_path / "learner.png"
    assert learner_score.main([str(make_run(tmp_path)), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
