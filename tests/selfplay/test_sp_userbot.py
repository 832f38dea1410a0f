"""User bots (``py:FILE:FUNC``): through the CLI, their errors, the view they get, clamped controls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from speedflip.cli import main
from speedflip.config import EnvConfig
from speedflip.env import layout as L
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.selfplay.match import match_env_config, play_match, summarize
from speedflip.selfplay.policies import resolve_policy
from speedflip.selfplay.userbot import UserBotError, UserBotPolicy, load_bot_function

REPO = Path(__file__).resolve().parents[2]

BOT = '''
import numpy as np

SEEN = []


def act(state):
    """Full throttle, steer towards the ball."""
    n = state["car_position"].shape[0]
    c = np.zeros((n, 8), np.float32)
    to_ball = state["ball_position"][None, :2] - state["car_position"][:, :2]
    fwd = state["car_forward"][:, :2]
    c[:, 0] = 1.0
    c[:, 1] = np.clip(4.0 * (fwd[:, 0] * to_ball[:, 1] - fwd[:, 1] * to_ball[:, 0]) / 1000.0, -1, 1)
    return c


def record(state):
    SEEN.append({k: np.array(v) for k, v in state.items()})
    return np.zeros((state["car_position"].shape[0], 8))


def wrong_shape(state):
    return np.zeros((1, 8))


def nan(state):
    return np.full((state["car_position"].shape[0], 8), np.nan)


NOT_A_FUNCTION = 3
'''


@pytest.fixture
def bot_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_bot.py"
    path.write_text(BOT)
    return path


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "speedflip.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_eval_user_bot_through_the_cli(tmp_path: Path, bot_file: Path) -> None:
    out = _cli(
        "eval", f"py:{bot_file}:act", "idle", "--games", "4", "--game-seconds", "10",
        "--league", str(tmp_path / "league.json"), "--json", str(tmp_path / "m.json"), cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    data = json.loads((tmp_path / "m.json").read_text())
    for key in ("games", "wins", "losses", "draws", "win_rate"):
        assert key in data, key
    assert data["games"] == 4
    assert data["wins"] + data["losses"] + data["draws"] == data["games"]
    assert data["win_rate"] == pytest.approx(data["wins"] / 4)
    assert len(data["games_detail"]) == 4
    assert [g["a_is_blue"] for g in data["games_detail"]] == [True, True, False, False]
    assert data["touches_a"] >= 1  # it drives at the ball
    assert data["player_a"] == f"{bot_file}:act" and data["player_b"] == "idle"
    league = json.loads((tmp_path / "league.json").read_text())
    assert league["players"][f"{bot_file}:act"]["games"] == 4
    assert (tmp_path / "games.csv").read_text().count("\n") == 5  # header + 4 games


@pytest.mark.parametrize(
    "func, message", [("wrong_shape", "returned controls of shape [1, 8]; expected [2, 8]"), ("nan", "NaN")]
)
def test_bad_controls_exit_2_without_traceback(tmp_path: Path, bot_file: Path, func: str, message: str) -> None:
    out = _cli("eval", f"py:{bot_file}:{func}", "idle", "--games", "2", "--game-seconds", "2",
               "--league", str(tmp_path / "league.json"), cwd=tmp_path)  # fmt: skip
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    assert "error:" in out.stderr and message in " ".join(out.stderr.split())
    assert not (tmp_path / "league.json").exists()  # nothing rated from a failed match


def _main_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    captured = capsys.readouterr()
    assert code == 2, captured.out + captured.err
    assert "Traceback" not in captured.out + captured.err
    return " ".join(captured.err.split())  # rich wraps long lines


def test_missing_file_or_function(tmp_path: Path, bot_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    league = ["--league", str(tmp_path / "league.json"), "--games", "2", "--game-seconds", "1"]
    err = _main_error(capsys, "eval", f"py:{tmp_path / 'nope.py'}:act", "idle", *league)
    assert "does not exist" in err and "nope.py" in err
    err = _main_error(capsys, "eval", f"py:{bot_file}:missing", "idle", *league)
    assert "no function named 'missing'" in err
    err = _main_error(capsys, "eval", "idle", f"py:{bot_file}:NOT_A_FUNCTION", *league)
    assert "no function named 'NOT_A_FUNCTION'" in err
    err = _main_error(capsys, "eval", "py:no_colon_here", "idle", *league)
    assert "py:path/to/file.py:function_name" in err
    broken = tmp_path / "broken.py"
    broken.write_text("import numpy as np\nraise RuntimeError('boom at import')\n")
    err = _main_error(capsys, "eval", f"py:{broken}:act", "idle", *league)
    assert "importing" in err and "RuntimeError: boom at import" in err
    assert not (tmp_path / "league.json").exists()


def test_bot_sees_the_documented_view(bot_file: Path) -> None:
    env = RocketLeagueVecEnv(match_env_config(2, 1, 1.0), seed=0)
    try:
        bot = UserBotPolicy(f"py:{bot_file}:record")
        play_match(env, bot, resolve_policy("idle", env.obs_dim, env.actions.table), 1.0)
    finally:
        env.close()
    seen = bot.func.__globals__["SEEN"]
    # 1 s at tick_skip 8 = ceil(120 / 8) = 15 decisions, called once per arena: 2 * 15 views
    assert len(seen) == 30
    shapes = {
        "ball_position": (3,), "ball_velocity": (3,), "ball_angular_velocity": (3,),
        "car_position": (2, 3), "car_velocity": (2, 3), "car_angular_velocity": (2, 3),
        "car_forward": (2, 3), "car_up": (2, 3), "car_boost": (2,), "car_on_ground": (2,),
        "car_is_demoed": (2,), "car_team": (2,), "controlled": (2,),
    }  # fmt: skip
    assert {k: v.shape for k, v in seen[0].items()} == shapes
    np.testing.assert_array_equal(seen[0]["car_team"], [L.BLUE, L.ORANGE])
    # arena 0: A (the bot) is blue; arena 1: A is orange. Views come arena by arena each step.
    np.testing.assert_array_equal(seen[0]["controlled"], [True, False])
    np.testing.assert_array_equal(seen[1]["controlled"], [False, True])
    first = seen[0]
    # world frame at kickoff: ball at the centre, blue car in the -y half, orange in the +y half, unit vectors
    np.testing.assert_allclose(first["ball_position"][:2], [0.0, 0.0], atol=1.0)
    assert first["car_position"][0, 1] < 0 < first["car_position"][1, 1]
    np.testing.assert_allclose(np.linalg.norm(first["car_forward"], axis=1), 1.0, atol=1e-3)
    assert np.all((first["car_boost"] >= 0) & (first["car_boost"] <= 100))


def test_load_bot_function_errors(tmp_path: Path, bot_file: Path) -> None:
    assert callable(load_bot_function(f"py:{bot_file}:act"))
    with pytest.raises(UserBotError, match="does not exist"):
        load_bot_function(f"py:{tmp_path / 'x.py'}:act")
    with pytest.raises(UserBotError, match="no function named"):
        load_bot_function(f"py:{bot_file}:nothing")


def test_example_chase_bot_outplays_idle() -> None:
    env = RocketLeagueVecEnv(match_env_config(4, 1, 20.0), seed=0)
    try:
        chase = UserBotPolicy(f"py:{REPO / 'examples' / 'chase_bot.py'}:act")
        s = summarize(play_match(env, chase, resolve_policy("idle", env.obs_dim, env.actions.table), 20.0))
    finally:
        env.close()
    assert s.touches_a >= 4 and s.touches_b == 0  # it reaches the ball in every game
    assert s.losses == 0


def _drive(custom_row: list[float], steps: int = 12) -> np.ndarray:
    """Car 0's state and the observations after ``steps`` decisions with ``custom_row`` as car 0's raw controls."""
    env = RocketLeagueVecEnv(EnvConfig(num_arenas=1, state_setters={"kickoff": 1.0}), seed=11)
    try:
        env.reset()
        neutral = int(np.flatnonzero(np.all(env.actions.table == 0.0, axis=1))[0])
        custom = np.full((2, 8), np.nan, np.float32)
        custom[0] = custom_row
        for _ in range(steps):
            env.step(np.full(2, neutral), custom)
        car = env.state.cars[0, 0, 0]
        # the car's physics, then both observations (they include the previous controls as applied)
        return np.concatenate([car[L.CAR_POS], car[L.CAR_VEL], car[L.CAR_FORWARD], [car[L.CAR_BOOST]], env.obs.ravel()])
    finally:
        env.close()


def test_custom_controls_are_clamped() -> None:
    full = _drive([1.0, 0, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(_drive([5.0, 0, 0, 0, 0, 0, 0, 0]), full)  # throttle 5 drives like 1
    half = _drive([0.5, 0, 0, 0, 0, 0, 0, 0])
    assert np.linalg.norm(half[3:6]) < np.linalg.norm(full[3:6]) - 50.0  # a real difference is visible
    # steer clamps to [-1, 1] too
    np.testing.assert_array_equal(_drive([1.0, -7.0, 0, 0, 0, 0, 0, 0]), _drive([1.0, -1.0, 0, 0, 0, 0, 0, 0]))
    assert not np.array_equal(_drive([1.0, -1.0, 0, 0, 0, 0, 0, 0]), _drive([1.0, -0.3, 0, 0, 0, 0, 0, 0]))
    # buttons are pressed above 0.5: boost 0.7 == 1, boost 0.3 == 0, and boosting changes the outcome
    boost_on = _drive([1.0, 0, 0, 0, 0, 0, 1.0, 0])
    np.testing.assert_array_equal(_drive([1.0, 0, 0, 0, 0, 0, 0.7, 0]), boost_on)
    np.testing.assert_array_equal(_drive([1.0, 0, 0, 0, 0, 0, 0.3, 0]), full)
    assert boost_on[9] < full[9]  # boost was spent
