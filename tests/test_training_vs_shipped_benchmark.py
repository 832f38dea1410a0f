"""benchmarks/training_vs_shipped.py: the shipped score, the windows and the correlation, computed by hand."""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from benchmark_modules import BENCHMARKS, load_benchmark


@pytest.fixture
def module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # it imports learner_score beside it
    return load_benchmark("training_vs_shipped")


def _results(rule_det: int, idle_det: int, rule_sto: int, idle_sto: int) -> dict[str, dict[str, dict[str, float]]]:
    """Win rates of 100 games each (what skill_curve.json stores beside the counts)."""
    return {
        "rule": {"deterministic": {"win_rate": rule_det / 100}, "stochastic": {"win_rate": rule_sto / 100}},
        "idle": {"deterministic": {"win_rate": idle_det / 100}, "stochastic": {"win_rate": idle_sto / 100}},
    }


def test_shipped_score_reads_the_shipped_bot_and_needs_sampled_results(module: ModuleType) -> None:
    snapshot = {"results": _results(10, 10, 10, 10), "shipped_results": _results(70, 100, 60, 90)}
    assert module.shipped_score({"seeds": [{"snapshots": [snapshot]}]}) == pytest.approx(0.8)  # (70+100+60+90)/400
    final_only = {"results": _results(50, 90, 40, 80)}
    assert module.shipped_score({"seeds": [{"snapshots": [final_only]}]}) == pytest.approx(0.65)
    exported_only = {"results": {o: {"deterministic": r["deterministic"]} for o, r in _results(1, 1, 1, 1).items()}}
    assert module.shipped_score({"seeds": [{"snapshots": [exported_only]}]}) is None


def test_window_mean_and_pearson_by_hand(module: ModuleType) -> None:
    games = [(3_000_000, 1.0), (4_000_000, 0.0), (5_000_000, 0.5), (8_000_000, 1.0)]
    assert module.window_mean(games, 4e6, 8e6) == pytest.approx(0.25)  # 0.0 and 0.5; 8M belongs to the next window
    assert math.isnan(module.window_mean(games, 9e6, 10e6))
    assert module.pearson([1.0, 2.0, 3.0], [2.0, 4.0, 6.0]) == pytest.approx(1.0)
    # x = 1, 2, 3; y = 1, 3, 2: covariance 1, spreads 2 and 2 -> r = 0.5
    assert module.pearson([1.0, 2.0, 3.0], [1.0, 3.0, 2.0]) == pytest.approx(0.5)


def test_cli_over_three_runs(tmp_path: Path) -> None:
    for index, (score_a, wins) in enumerate([(0.2, 40), (0.6, 60), (1.0, 80)]):
        run = tmp_path / f"R-s{index}"
        (run / f"seed{index}").mkdir(parents=True)
        snapshot = {"agent_steps": 10_000_000, "results": _results(wins, wins, wins, wins)}
        (run / "skill_curve.json").write_text(json.dumps({"seeds": [{"snapshots": [snapshot]}]}))
        with (run / f"seed{index}" / "games.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=["step", "player_a", "player_b", "score_a"])
            writer.writeheader()
            for step in (5_000_000, 9_000_000, 9_500_000):
                writer.writerow({"step": step, "player_a": "learner", "player_b": "rule", "score_a": score_a})
            writer.writerow({"step": 9_000_000, "player_a": "learner", "player_b": "idle", "score_a": 0.0})
    out = tmp_path / "out.json"
    runs = [str(path) for path in sorted(tmp_path.glob("R-s*"))]
    command = [sys.executable, str(BENCHMARKS / "training_vs_shipped.py"), *runs, "--json", str(out)]
    subprocess.run(command, check=True, capture_output=True, text=True)
    report = json.loads(out.read_text())
    assert [row["shipped score"] for row in report["rows"]] == pytest.approx([0.4, 0.6, 0.8])
    assert [row["8-10M"] for row in report["rows"]] == pytest.approx([0.2, 0.6, 1.0])  # the idle game is not read
    assert report["pearson_r"]["4-8M"] == pytest.approx(1.0)
