"""benchmarks/scoreless.py: the games an evaluated bot did not score in, counted by hand."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from benchmark_modules import load_benchmark
from speedflip.selfplay.match import GameResult


@pytest.fixture
def scoreless() -> ModuleType:
    return load_benchmark("scoreless")


def report(goals: list[tuple[int, int]]) -> dict[str, object]:
    return {
        "player_b": "idle",
        "action_mode": "stochastic",
        "games_detail": [
            GameResult(k, k % 2 == 0, a, b, 3, 1, 0, 0, 0, 0, 60.0).as_dict() for k, (a, b) in enumerate(goals)
        ],
    }


def test_counts_by_hand(scoreless: ModuleType) -> None:
    # 2:0 win, 0:0 draw, 1:1 draw, 0:1 loss, 3:2 win
    s = scoreless.count(report([(2, 0), (0, 0), (1, 1), (0, 1), (3, 2)]), "r.json")
    assert (s.games, s.wins, s.draws, s.losses) == (5, 2, 2, 1)
    assert s.scoreless == 2  # the 0:0 and the 0:1
    assert s.goalless_draws == 1
    assert s.goals_per_game_a == pytest.approx(6 / 5)
    assert s.goals_per_game_b == pytest.approx(4 / 5)
    assert (s.player_b, s.action_mode) == ("idle", "stochastic")


def test_main_prints_and_writes(scoreless: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(report([(0, 0), (1, 0)])))
    out = tmp_path / "counts.json"
    assert scoreless.main([str(path), "--json", str(out)]) == 0
    assert "1 / 1 / 0 of 2; A scored none in 1, 0:0 1" in capsys.readouterr().out
    assert json.loads(out.read_text())[0]["goalless_draws"] == 1


def test_a_report_without_games_is_one_clear_error(
    scoreless: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"wins": 3}))
    assert scoreless.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert "no games_detail" in err and "--json" in err
