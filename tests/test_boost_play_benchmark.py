"""benchmarks/boost_play.py: boost and speed per side, by hand and in a real (short) match."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from benchmark_modules import BENCHMARKS, load_benchmark


@pytest.fixture
def boost_play(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # it imports match_setup beside it, as when run as a script
    return load_benchmark("boost_play")


def test_side_usage_by_hand(boost_play: ModuleType) -> None:
    boost = np.array([0.0, 0.5, 50.0, 100.0])  # two steps below 1
    speed = np.array([0.0, 2300.0, 1000.0, 2200.0])  # two at or above 2200
    gained = np.array([0.0, 12.0, 0.0, 100.0])
    spent = np.array([3.0, 0.0, 3.0, 0.0])
    u = boost_play.side_usage("A", "bot", boost, gained, spent, speed, minutes=2.0)
    assert u.mean_boost == pytest.approx(150.5 / 4)
    assert u.empty_share == pytest.approx(0.5)
    assert u.picked_up_per_minute == pytest.approx(56.0)
    assert u.spent_per_minute == pytest.approx(3.0)
    assert u.mean_speed == pytest.approx(5500.0 / 4)
    assert u.supersonic_share == pytest.approx(0.5)


def test_idle_car_keeps_its_kickoff_boost(boost_play: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "boost.json"
    assert boost_play.main(["rule", "idle", "--games", "2", "--game-seconds", "3", "--json", str(out)]) == 0
    payload = json.loads(out.read_text())
    rule, idle = payload["sides"]
    assert (rule["player"], idle["player"]) == ("rule", "idle")
    assert idle["spent_per_minute"] == 0.0 and idle["picked_up_per_minute"] == 0.0
    assert idle["mean_boost"] == pytest.approx(33.33, abs=0.1)  # a kickoff starts every car with a third of a tank
    assert idle["mean_speed"] < 1.0
    assert rule["spent_per_minute"] > 0.0  # the rule bot boosts at the ball from its kickoff spot
    assert rule["mean_speed"] > 500.0
    assert payload["wins"] + payload["draws"] + payload["losses"] == 2


def test_a_missing_run_is_one_line(boost_play: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert boost_play.main([str(tmp_path / "no-such-run"), "rule", "--games", "2"]) == 2
    err = capsys.readouterr().err
    assert "no-such-run" in err and len(err.strip().splitlines()) == 1
