"""benchmarks/ball_zones.py: the ball's zones in A's frame, by hand and in a real (short) match."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from benchmark_modules import BENCHMARKS, load_benchmark


@pytest.fixture
def ball_zones(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # it imports match_setup beside it, as when run as a script
    return load_benchmark("ball_zones")


def test_zone_masks_by_hand(ball_zones: ModuleType) -> None:
    ball = np.array(
        [
            [0.0, -4000.0, 93.0],  # own third, on the ground
            [3800.0, 4000.0, 93.0],  # attacking corner (side wall and attacking third)
            [0.0, 0.0, 500.0],  # middle, in the air
            [-3700.0, 0.0, 93.0],  # side wall, middle
        ]
    )
    car_a = np.array([[0.0, -4100.0, 17.0], [0.0, 0.0, 17.0], [0.0, 0.0, 17.0], [0.0, 0.0, 17.0]])
    car_b = np.array([[0.0, 5000.0, 17.0], [3800.0, 4200.0, 17.0], [0.0, 0.0, 17.0], [0.0, 0.0, 17.0]])
    m = ball_zones.zone_masks(ball, car_a, car_b)
    assert m["own_third"].tolist() == [True, False, False, False]
    assert m["middle_third"].tolist() == [False, False, True, True]
    assert m["attack_third"].tolist() == [False, True, False, False]
    assert m["side_wall"].tolist() == [False, True, False, True]
    assert m["attack_corner"].tolist() == [False, True, False, False]
    assert m["goal_mouth"].tolist() == [False, False, False, False]
    assert m["beside_goal"].tolist() == [False, False, False, False]  # y 4000 is 1120 uu from the back wall
    assert m["air"].tolist() == [False, False, True, False]
    assert m["near_a"].tolist() == [True, False, False, False]  # 125 uu / far / 483 / 3700 away
    assert m["near_b"].tolist() == [False, True, False, False]  # far / 214 / 483 / 3700 away


def test_goal_mouth_and_beside_goal(ball_zones: ModuleType) -> None:
    ball = np.array([[500.0, 4500.0, 93.0], [-1500.0, 4500.0, 93.0], [500.0, 4000.0, 93.0]])
    cars = np.zeros_like(ball)
    m = ball_zones.zone_masks(ball, cars, cars)
    assert m["goal_mouth"].tolist() == [True, False, False]  # inside the posts, 620 uu from the back wall
    assert m["beside_goal"].tolist() == [False, True, False]
    assert m["attack_third"].all()


def test_aim_masks_by_hand(ball_zones: ModuleType) -> None:
    """From (0, 2120) the ball reaches the goal line (y 5120) after 1 s at x = vx: inside the posts up to
    892.755 - 91.25 = 801.505 uu, a near miss up to 500 uu beyond; a ball moving away, or not touched, is neither."""
    pos = np.tile([0.0, 2120.0, 93.0], (6, 1))
    vel = np.array(
        [[800.0, 3000.0, 0.0], [-1000.0, 3000.0, 0.0], [1301.0, 3000.0, 0.0], [1302.0, 3000.0, 0.0],
         [0.0, -3000.0, 0.0], [0.0, 3000.0, 0.0]]
    )  # fmt: skip
    touched = np.array([True, True, True, True, True, False])
    m = ball_zones.aim_masks(pos, vel, touched)
    assert m["on_target"].tolist() == [True, False, False, False, False, False]
    assert m["near_miss"].tolist() == [False, True, True, False, False, False]


def test_orange_games_are_turned(ball_zones: ModuleType) -> None:
    pos = np.array([[[100.0, -4000.0, 93.0], [100.0, -4000.0, 93.0]]])  # [T=1, K=2, 3]
    turned = ball_zones.to_a_frame(pos, np.array([True, False]))
    assert turned[0, 0].tolist() == [100.0, -4000.0, 93.0]  # A on blue: as it is (its own third)
    assert turned[0, 1].tolist() == [-100.0, 4000.0, 93.0]  # A on orange: the ball is in A's attacking third


def test_rule_bot_against_idle(ball_zones: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "zones.json"
    assert ball_zones.main(["rule", "idle", "--games", "2", "--game-seconds", "3", "--json", str(out)]) == 0
    payload = json.loads(out.read_text())
    won, not_won = payload["groups"]
    assert won["games"] + not_won["games"] == 2 == payload["wins"] + payload["draws"] + payload["losses"]
    assert won["games"] == payload["wins"]
    played = won if won["games"] else not_won
    # a kickoff puts the ball at centre field: in 3 s it stays in the middle third most of the time
    assert played["middle_third"] > 0.5
    assert played["own_third"] + played["middle_third"] + played["attack_third"] == pytest.approx(1.0)
    assert played["steps_per_game"] == pytest.approx(3 * 120 / 8, abs=1)
    assert 0.0 <= played["on_target_a_per_game"] <= played["touches_a_per_game"]
    assert 0.0 <= played["near_miss_a_per_game"] <= played["touches_a_per_game"]


def test_a_missing_run_is_one_line(ball_zones: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ball_zones.main([str(tmp_path / "no-such-run"), "rule", "--games", "2"]) == 2
    err = capsys.readouterr().err
    assert "no-such-run" in err and len(err.strip().splitlines()) == 1
