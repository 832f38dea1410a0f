"""``speedflip eval`` with a trained run and ``speedflip league``, through the real command line."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from speedflip.checkpoint import list_checkpoints
from speedflip.cli import main
from speedflip.selfplay import elo


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "speedflip.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_eval_run_vs_rule_then_league(tmp_path: Path, run_1v1: Path) -> None:
    run = tmp_path / "myrun"
    shutil.copytree(run_1v1, run)
    step = int(list_checkpoints(run / "checkpoints")[-1].name)
    work = tmp_path / "elsewhere"  # run from another folder: the ratings must land in the run dir anyway
    work.mkdir()

    out = _cli("eval", str(run), "rule", "--games", "4", "--game-seconds", "8", "--json", str(tmp_path / "m.json"),
               cwd=work)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    assert (run / "league.json").is_file() and (run / "games.csv").is_file()
    assert not (work / "runs").exists()  # not the default runs/league.json

    data = json.loads((tmp_path / "m.json").read_text())
    name = f"myrun@{step}"
    assert data["player_a"] == name and data["player_b"] == "rule"
    assert data["games"] == 4 and data["wins"] + data["draws"] + data["losses"] == 4
    # by default the run plays as its exported bot does: its most likely action
    assert data["action_mode"] == "deterministic" and data["deterministic"] is True
    assert "most likely action" in " ".join(out.stdout.split())

    league = json.loads((run / "league.json").read_text())
    players = league["players"]
    assert set(players) == {"rule", name}
    assert players["rule"]["rating"] == 1000.0  # the reference never moves
    assert players[name]["games"] == 4 and players[name]["step"] == step
    assert players[name]["path"] == str(run / "checkpoints" / str(step))
    with (run / "games.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4
    assert {r["player_a"] for r in rows} == {name} and {r["player_b"] for r in rows} == {"rule"}
    assert [r["a_is_blue"] for r in rows] == ["True", "True", "False", "False"]
    # the stored rating is the games replayed with K=32 against a fixed 1000
    rating = 1000.0
    for r in rows:
        rating, _ = elo.update(rating, 1000.0, float(r["score_a"]))
        assert int(r["step"]) == step
    assert players[name]["rating"] == pytest.approx(rating)
    assert data["elo_a"] == pytest.approx(rating) and data["elo_b"] == 1000.0
    # the score in each row agrees with its goals
    for r, g in zip(rows, data["games_detail"], strict=True):
        assert float(r["score_a"]) == elo.score_from_goals(int(r["goals_a"]), int(r["goals_b"])) == g["score_a"]
    # one record of where each own goal came from, per side, agreeing with the counts
    detail = data["own_goals_detail"]
    assert sum(g["conceded_by_a"] for g in detail) == data["own_goals_a"]
    assert sum(not g["conceded_by_a"] for g in detail) == data["own_goals_b"]
    # the games without a goal of each side agree with the games' records, and the table shows them
    assert data["scoreless_a"] == sum(g["goals_a"] == 0 for g in data["games_detail"])
    assert data["scoreless_b"] == sum(g["goals_b"] == 0 for g in data["games_detail"])
    assert "games without a goal" in out.stdout

    out = _cli("league", str(run), cwd=work)
    assert out.returncode == 0, out.stdout + out.stderr
    assert name in out.stdout and "rule" in out.stdout and "Elo" in out.stdout
    png = run / "league.png"
    assert png.is_file() and png.stat().st_size > 1000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_league_without_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["league", str(tmp_path)]) == 1
    assert "no league table" in capsys.readouterr().out
    assert not (tmp_path / "league.png").exists()


@pytest.mark.filterwarnings("ignore:No artists with labels:UserWarning")  # a league with no games: empty plot
def test_league_plot_path_and_corrupt_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "league.json").write_text("{broken")
    plot = tmp_path / "custom.png"
    assert main(["league", str(tmp_path / "league.json"), "--plot", str(plot)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "was corrupt" in out and "league.json.bad" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("games", ["1", "0", "-3"])
def test_too_few_games_is_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str], games: str) -> None:
    code = main(["eval", "rule", "idle", "--games", games, "--league", str(tmp_path / "league.json")])
    captured = capsys.readouterr()
    assert code == 2
    assert "--games must be at least 2" in " ".join(captured.err.split())
    assert not (tmp_path / "league.json").exists()


def test_too_few_games_exit_code_through_the_shell(tmp_path: Path) -> None:
    out = _cli("eval", "rule", "idle", "--games", "1", cwd=tmp_path)
    assert out.returncode == 2
    assert "--games must be at least 2" in " ".join(out.stderr.split())
    assert "Traceback" not in out.stdout + out.stderr


@pytest.mark.parametrize(
    ("flags", "deterministic"),
    [((), True), (("--deterministic",), True), (("--stochastic",), False)],
)
def test_eval_plays_the_most_likely_action_unless_stochastic(
    monkeypatch: pytest.MonkeyPatch, flags: tuple[str, ...], deterministic: bool
) -> None:
    """The default is how the exported bot plays; --stochastic samples; --deterministic is a no-op alias."""
    import speedflip.selfplay.evaluate as rl_eval

    seen: list[object] = []

    def fake_run_eval(a: str, b: str, games: int, team_size: int, seconds: float, seed: int, det: bool,
                      *rest: object) -> int:  # fmt: skip
        seen.append(det)
        return 0

    monkeypatch.setattr(rl_eval, "run_eval", fake_run_eval)
    assert main(["eval", "random", "idle", *flags]) == 0
    assert seen == [deterministic]


def test_eval_refuses_stochastic_and_deterministic_together(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "random", "idle", "--stochastic", "--deterministic"]) == 2
    assert "contradict" in capsys.readouterr().err


def test_eval_json_names_the_action_mode(tmp_path: Path) -> None:
    league = str(tmp_path / "league.json")
    for flags, mode in (((), "deterministic"), (("--stochastic",), "stochastic")):
        path = tmp_path / f"{mode}.json"
        args = ["eval", "rule", "idle", "--games", "2", "--game-seconds", "2", "--league", league, "--json", str(path)]
        assert main([*args, *flags]) == 0
        data = json.loads(path.read_text())
        assert data["action_mode"] == mode and data["deterministic"] is (mode == "deterministic")
