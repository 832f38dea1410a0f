"""benchmarks/sampled_decisions.py: zones and per-zone figures by hand, the draws of speedflip eval, a real match."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from benchmark_modules import BENCHMARKS, load_benchmark

TESTS = Path(__file__).parent


@pytest.fixture
def sampled_decisions(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # it imports ball_zones and match_setup beside it
    return load_benchmark("sampled_decisions")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One checkpoint of a tiny 1v1 run (the self-play tests' helper)."""
    import sys

    sys.path.insert(0, str(TESTS / "selfplay"))
    try:
        from sp_helpers import train_tiny_run
    finally:
        sys.path.remove(str(TESTS / "selfplay"))
    run = tmp_path_factory.mktemp("runs") / "tiny1v1"
    train_tiny_run(run, team_size=1)
    return run


def test_decision_zone_by_hand(sampled_decisions: ModuleType) -> None:
    ball = np.array(
        [
            [0.0, -4000.0, 93.0],  # own third (y < -5120 + 3413)
            [0.0, 0.0, 93.0],  # middle third
            [2000.0, 3500.0, 93.0],  # attacking third, 1620 uu from the back wall: not near the goal
            [500.0, 4500.0, 93.0],  # within 1000 uu of the back wall, inside the posts (892.755)
            [-1500.0, 4500.0, 93.0],  # the same, outside them
            [900.0, 4200.0, 93.0],  # just outside a post, 920 uu from the back wall
        ]
    )
    zones = [sampled_decisions.DECISION_ZONES[i] for i in sampled_decisions.decision_zone(ball)]
    assert zones == ["own_third", "middle_third", "attack_third", "goal_mouth", "beside_goal", "beside_goal"]


def test_summarize_decisions_by_hand(sampled_decisions: ModuleType) -> None:
    # two games, three steps each; zones: game 0 beside the goal for 2 steps then the mouth; game 1 middle third
    zone = np.array([[4, 1], [4, 1], [3, 1]])
    off = np.array([[True, False], [False, False], [True, True]])
    p_max = np.array([[0.5, 0.9], [0.7, 0.9], [0.4, 0.6]])
    entropy = np.array([[1.0, 0.2], [0.6, 0.2], [1.2, 0.8]])
    touch = np.array([[1.0, 0.0], [0.5, 0.0], [2.0, 0.1]])
    counted = np.array([[True, True], [True, True], [False, True]])  # game 0's last step scored: not counted
    rows = sampled_decisions.summarize_decisions(
        "not won", zone, off, p_max, entropy, {"aimed_touch": touch}, counted, 1 / 15
    )
    by_zone = {r.zone: r for r in rows}
    beside, mouth, middle = by_zone["beside_goal"], by_zone["goal_mouth"], by_zone["middle_third"]
    assert beside.decisions == 2 and beside.share == pytest.approx(2 / 6)
    assert beside.off_argmax == pytest.approx(0.5) and beside.p_argmax == pytest.approx(0.6)
    assert beside.entropy == pytest.approx(0.8)
    assert beside.reward_per_second == pytest.approx(1.5 / (2 / 15))  # 1.5 paid in two steps of 1/15 s
    assert mouth.decisions == 1 and mouth.reward_per_second == 0.0  # its one step is not counted
    assert middle.decisions == 3 and middle.off_argmax == pytest.approx(1 / 3)
    assert middle.reward_per_second_by_component["aimed_touch"] == pytest.approx(0.1 / (3 / 15))
    assert by_zone["own_third"].decisions == 0 and by_zone["own_third"].entropy == 0.0
    assert sum(r.share for r in rows) == pytest.approx(1.0)


def test_the_recorder_draws_what_speedflip_eval_draws(sampled_decisions: ModuleType, tiny_run: Path) -> None:
    from speedflip.env.vec_env import RocketLeagueVecEnv
    from speedflip.selfplay.evaluate import resolve_player
    from speedflip.selfplay.match import match_env_config

    env = RocketLeagueVecEnv(match_env_config(8, 1, 5.0), seed=0)
    try:
        obs = env.reset()
        plain = resolve_player(str(tiny_run), env, 0, deterministic=False)
        recorder = sampled_decisions.DecisionRecorder(resolve_player(str(tiny_run), env, 0, deterministic=False))
        for _ in range(20):
            drawn = recorder.act(obs, env.state, env.car_teams)
            assert plain.act(obs, env.state, env.car_teams).tolist() == drawn.tolist()
    finally:
        env.close()
    off = np.concatenate(recorder.off_argmax)
    entropy = np.concatenate(recorder.entropy)
    assert off.any()  # a barely trained network over 90 rows: most draws are not its argmax
    assert ((entropy > 0) & (entropy <= math.log(90) + 1e-4)).all()


def test_a_real_match_sampled_and_as_exported(sampled_decisions: ModuleType, tiny_run: Path, tmp_path: Path) -> None:
    for stochastic in (True, False):
        out = tmp_path / f"decisions-{stochastic}.json"
        argv = [str(tiny_run), "idle", "--games", "2", "--game-seconds", "3", "--json", str(out)]
        assert sampled_decisions.main(argv + (["--stochastic"] if stochastic else [])) == 0
        payload = json.loads(out.read_text())
        assert payload["reward_weights"] and "goal" not in payload["reward_weights"]
        for group in ("won", "not won"):
            rows = [r for r in payload["zones"] if r["group"] == group]
            assert [r["zone"] for r in rows] == list(sampled_decisions.DECISION_ZONES)
            if sum(r["decisions"] for r in rows):
                assert sum(r["share"] for r in rows) == pytest.approx(1.0)
        played = [r for r in payload["zones"] if r["decisions"]]
        assert played
        if stochastic:
            assert any(r["off_argmax"] > 0 for r in played)
        else:
            assert all(r["off_argmax"] == 0 for r in played)  # as exported, every row played is the argmax


def test_a_builtin_player_a_is_one_line(sampled_decisions: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert sampled_decisions.main(["rule", "idle", "--games", "2", "--game-seconds", "1"]) == 2
    err = capsys.readouterr().err
    assert "rule" in err and len(err.strip().splitlines()) == 1
