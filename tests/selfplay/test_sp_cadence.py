"""Decision cadence in matches: each side decides on its own tick, repeats its action in between, and
``speedflip eval`` plays a bot trained at another tick skip against scripted players at theirs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sp_helpers import train_tiny_run

from speedflip.cli import main
from speedflip.env.arenas import GameArrays
from speedflip.env.vec_env import RocketLeagueVecEnv, StepResult
from speedflip.selfplay.evaluate import decision_ticks
from speedflip.selfplay.match import SCRIPTED_TICK_SKIP, match_env_config, play_match


class CountingPolicy:
    """Answers call ``i`` with table row ``offset + i`` for every agent: which call an applied row came from."""

    def __init__(self, name: str, offset: int) -> None:
        self.name, self.offset, self.calls = name, offset, 0
        self.table = None

    def act(self, obs: np.ndarray, state: GameArrays, car_teams: np.ndarray) -> np.ndarray:
        row = self.offset + self.calls
        self.calls += 1
        return np.full(obs.shape[0], row, np.int64)

    def reset(self, rows: np.ndarray) -> None:
        """Stateless."""


def _applied_rows(decision_ticks: tuple[int, int] | None, env_tick: int, steps: int) -> np.ndarray:
    """The table rows the env was stepped with, ``[steps, agents]``, A = rows 0.., B = rows 40.."""
    env = RocketLeagueVecEnv(match_env_config(2, 1, 60.0, tick_skip=env_tick), seed=0)
    applied: list[np.ndarray] = []
    step = env.step

    def recording_step(actions: np.ndarray, custom: np.ndarray | None = None) -> StepResult:
        applied.append(np.asarray(actions).copy())
        return step(actions, custom)

    env.step = recording_step  # type: ignore[method-assign]
    try:
        seconds = steps * env_tick / 120.0
        play_match(env, CountingPolicy("a", 0), CountingPolicy("b", 40), seconds, decision_ticks=decision_ticks)
    finally:
        env.close()
    return np.stack(applied)


def test_each_side_repeats_its_action_between_its_decisions() -> None:
    # env at 4 ticks; A decides every 12 ticks (3 steps), B every 8 (2 steps); no goal comes within 0.4 s of a kickoff
    rows = _applied_rows((12, 8), env_tick=4, steps=12)
    # games 0 (A blue) and 1 (A orange): agents [game0 blue, game0 orange, game1 blue, game1 orange]
    a_cols, b_cols = [0, 3], [1, 2]
    # the policies are asked at every step (call i -> row offset + i) but only calls 0, 3, 6, 9 of A are applied
    expected_a = [0, 0, 0, 3, 3, 3, 6, 6, 6, 9, 9, 9]
    expected_b = [40, 40, 42, 42, 44, 44, 46, 46, 48, 48, 50, 50]
    for col in a_cols:
        assert rows[:, col].tolist() == expected_a
    for col in b_cols:
        assert rows[:, col].tolist() == expected_b


def test_without_decision_ticks_every_step_is_a_decision() -> None:
    rows = _applied_rows(None, env_tick=8, steps=5)
    assert rows[:, 0].tolist() == [0, 1, 2, 3, 4]
    assert rows[:, 1].tolist() == [40, 41, 42, 43, 44]


def test_decision_ticks_must_be_multiples_of_the_env_tick() -> None:
    env = RocketLeagueVecEnv(match_env_config(2, 1, 1.0, tick_skip=8), seed=0)
    try:
        with pytest.raises(ValueError, match=r"multiples of the match env's tick_skip \(8\).*divisor \(4\)"):
            play_match(env, CountingPolicy("a", 0), CountingPolicy("b", 40), 1.0, decision_ticks=(12, 8))
    finally:
        env.close()


def test_eval_plays_a_tick_12_bot_against_the_rule_bot_at_8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "tick12"
    train_tiny_run(run, env={"tick_skip": 12})
    out = tmp_path / "m.json"
    code = main(["eval", str(run), "rule", "--games", "2", "--game-seconds", "4", "--json", str(out),
                 "--league", str(tmp_path / "league.json")])  # fmt: skip
    assert code == 0
    printed = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    assert "A decides every 12 ticks, B every 8" in printed and "4 ticks at a time" in printed
    summary = json.loads(out.read_text())
    assert (summary["tick_skip_a"], summary["tick_skip_b"]) == (12, SCRIPTED_TICK_SKIP)
    assert summary["games"] == 2
    assert all(game["seconds"] == pytest.approx(4.0, abs=4 / 120) for game in summary["games_detail"])


@pytest.mark.parametrize(
    ("specs", "trained", "expected"),
    [
        (("RUN", "rule"), 12, (12, 8)),
        (("py:bot.py:act", "RUN"), 4, (8, 4)),
        (("RUN", "idle"), 12, (12, 12)),  # the idle car never acts: no finer match env for it
        (("idle", "rule"), None, (8, 8)),
        (("idle", "idle"), None, (8, 8)),
        (("RUN", "RUN"), 8, (8, 8)),
    ],
)
def test_decision_ticks_per_player(specs: tuple[str, str], trained: int | None, expected: tuple[int, int]) -> None:
    options: dict[str, object] = {} if trained is None else {"tick_skip": trained}
    assert decision_ticks(specs, options) == expected


def test_eval_refuses_a_recurrent_bot_that_would_repeat_actions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recurrent = {"hidden_size": 8, "sequence_length": 8, "encoder_layers": [8], "head_layers": [8]}
    run = tmp_path / "lstm12"
    train_tiny_run(run, algo="ppo_recurrent", env={"tick_skip": 12}, recurrent=recurrent)
    code = main(["eval", str(run), "rule", "--games", "2", "--game-seconds", "2",
                 "--league", str(tmp_path / "league.json")])  # fmt: skip
    captured = capsys.readouterr()
    assert code != 0
    message = " ".join((captured.out + captured.err).split())
    assert "is a recurrent policy trained at env.tick_skip=12" in message and "Traceback" not in message
    assert not (tmp_path / "league.json").exists()  # nothing rated
    # against idle (no cadence of its own) it plays at its trained tick skip
    assert main(["eval", str(run), "idle", "--games", "2", "--game-seconds", "2",
                 "--league", str(tmp_path / "league.json")]) == 0  # fmt: skip
