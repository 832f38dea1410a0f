"""The final pick: scores by hand, the newest of equal ones, best.json replaced, a short rated run ending with it."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from sp_helpers import tiny_config

from speedflip.config import ConfigError, build_config
from speedflip.selfplay import final_pick as final_pick_module
from speedflip.selfplay.best import BestMilestone, read_best, write_best
from speedflip.selfplay.final_pick import (
    FINAL_PICK_SEED_OFFSET,
    Candidate,
    final_pick,
    pick_best,
    pick_without_own_goal,
    veto_order,
)
from speedflip.selfplay.league import IDLE_PLAYER, REFERENCE_PLAYER, League
from speedflip.selfplay.rating import anchor_games, idle_own_goals


def _candidate(step: int, rule: float, idle: float, games: int = 4) -> Candidate:
    points, games_played = {"rule": rule, "idle": idle}, {"rule": games, "idle": games}
    return Candidate(f"main@{step}", step, Path(str(step)), points, games_played)


def test_the_score_rate_counts_both_anchors_games() -> None:
    # 2 wins and 3 draws of 4 + 4 games: (3.5 + 4.0) / 8
    assert _candidate(1, rule=3.5, idle=4.0).score == pytest.approx(7.5 / 8)
    assert _candidate(1, rule=0.0, idle=0.0).score == 0.0


def test_the_best_score_is_picked_and_the_newest_of_equal_ones() -> None:
    older_best = [_candidate(100, 4.0, 4.0), _candidate(200, 3.0, 4.0), _candidate(300, 2.0, 4.0)]
    assert pick_best(older_best).step == 100  # not the newest: the best
    tied = [_candidate(100, 3.0, 4.0), _candidate(200, 4.0, 3.0), _candidate(300, 1.0, 4.0)]
    assert pick_best(tied).step == 200  # 7/8 both: the newer one
    with pytest.raises(ValueError, match="no candidates"):
        pick_best([])


def _run_with_milestones(tmp_path: Path, source: Path, steps: list[int], rated: list[int]) -> tuple[Path, League]:
    run = tmp_path / "run"
    league = League.load(run / "league.json")
    for step in steps:
        shutil.copytree(source, run / "milestones" / "main" / str(step))
        if step in rated:
            league.player(f"main@{step}", step=step, path=str(run / "milestones" / "main" / str(step))).rating = step
    return run, league


def test_the_best_of_the_last_milestones_replaces_the_ratings_pick(
    tmp_path: Path, run_1v1: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scores decided here (anchor_games replaced): of the last 3 rated milestones the middle one is best and
    ships although best.json named the newest; an unrated folder and the oldest milestone take no part."""
    source = next((run_1v1 / "checkpoints").iterdir())
    run, league = _run_with_milestones(tmp_path, source, [100, 200, 300, 400, 500], rated=[100, 200, 300, 400])
    write_best(run, BestMilestone("milestones/main/400", "main@400", 400, 400.0, "main", anchor_score=0.9))
    points = {"200": 5.0, "300": 7.0, "400": 6.0}  # of 8 games against each anchor
    played: list[tuple[str, int, float, int]] = []

    def fake(path: Path, env: object, games: int, seconds: float, seed: int) -> tuple[dict, dict]:
        played.append((path.name, games, seconds, seed))
        return {"rule": points[path.name], "idle": 8.0}, {"rule": games, "idle": games}

    monkeypatch.setattr(final_pick_module, "anchor_games", fake)
    cfg = tiny_config(selfplay={"final_pick_milestones": 3, "final_pick_games": 8, "final_pick_game_seconds": 5.0})
    pick = final_pick(run, "main", league, cfg.env, cfg.selfplay, seed=11)

    assert pick is not None
    assert played == [("200", 8, 5.0, 11), ("300", 8, 5.0, 11), ("400", 8, 5.0, 11)]  # 500 is not rated
    assert pick.picked.name == "main@300" and pick.picked.score == pytest.approx(15 / 16)
    best = read_best(run)
    assert best is not None
    assert (best.name, best.path, best.step, best.elo) == ("main@300", "milestones/main/300", 300, 300.0)
    assert best.anchor_score == best.stage_best_score == pytest.approx(15 / 16, abs=1e-4)
    record = json.loads((run / "final_pick.json").read_text())
    assert record["picked"]["name"] == "main@300"
    assert [c["score"] for c in record["candidates"]] == [pytest.approx(13 / 16), pytest.approx(15 / 16), 0.875]
    assert (record["games_per_anchor"], record["game_seconds"], record["seed"]) == (8, 5.0, 11)


def test_real_games_against_the_anchors(tmp_path: Path, run_1v1: Path) -> None:
    """Two copies of one policy play the same seeded games, so they score alike and the newer ships; the
    recorded points are those anchor_games gives for the same seed."""
    source = next((run_1v1 / "checkpoints").iterdir())
    run, league = _run_with_milestones(tmp_path, source, [100, 200], rated=[100, 200])
    cfg = tiny_config(selfplay={"final_pick_milestones": 5, "final_pick_games": 2, "final_pick_game_seconds": 2.0})
    pick = final_pick(run, "main", league, cfg.env, cfg.selfplay, seed=4)
    assert pick is not None
    assert [c.step for c in pick.candidates] == [100, 200]
    first, second = pick.candidates
    assert first.games == second.games == {REFERENCE_PLAYER: 2, IDLE_PLAYER: 2}
    assert first.points == second.points
    assert pick.picked.step == 200
    assert anchor_games(run / "milestones" / "main" / "100", cfg.env, 2, 2.0, 4) == (first.points, first.games)


def test_no_rated_milestone_is_no_pick(tmp_path: Path, run_1v1: Path) -> None:
    source = next((run_1v1 / "checkpoints").iterdir())
    run, league = _run_with_milestones(tmp_path, source, [100], rated=[])
    cfg = tiny_config(selfplay={"final_pick_milestones": 2})
    assert final_pick(run, "main", league, cfg.env, cfg.selfplay, seed=0) is None
    assert read_best(run) is None and not (run / "final_pick.json").exists()


@pytest.mark.parametrize(
    ("values", "message"),
    [({"final_pick_games": 3}, "final_pick_games"), ({"final_pick_milestones": -1}, "final_pick_milestones")],
)
def test_bad_settings_name_the_setting(values: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_config({"selfplay": values})


def test_a_rated_run_ends_with_the_final_pick(tmp_path: Path) -> None:
    from rich.console import Console

    from speedflip.train.run import train

    steps = 64  # 2 arenas x 2 cars x 16 steps: a milestone after every iteration
    cfg = tiny_config(
        ppo={"num_steps": 16, "minibatch_size": 64},
        run={"total_steps": 4 * steps, "checkpoint_interval_steps": 2 * steps, "milestone_replays": False},
        selfplay={"snapshot_interval_steps": steps, "rating_games": 2, "rating_game_seconds": 2.0,
                  "final_pick_milestones": 3, "final_pick_games": 2, "final_pick_game_seconds": 2.0},
    )  # fmt: skip
    run = tmp_path / "run"
    out = io.StringIO()
    assert train(cfg, run, console=Console(file=out, width=200)) == 0, out.getvalue()
    text = " ".join(out.getvalue().split())
    record = json.loads((run / "final_pick.json").read_text())
    assert [c["name"] for c in record["candidates"]] == [f"main@{s * steps}" for s in (2, 3, 4)]
    scores = [(c["score"], c["step"]) for c in record["candidates"]]
    picked = max(scores)
    assert record["picked"]["step"] == picked[1] and record["seed"] == cfg.run.seed + FINAL_PICK_SEED_OFFSET
    best = json.loads((run / "best.json").read_text())
    assert best["name"] == f"main@{picked[1]}" and best["anchor_score"] == pytest.approx(picked[0], abs=1e-4)
    assert "final pick in" in text and f"main@{picked[1]} ships" in text
    assert text.index("final pick in") < text.index("milestone rating:")  # its time is counted with the rating's

    # `speedflip pick` on the finished run: the run's settings unless given
    from speedflip.cli import main

    assert main(["pick", str(run), "--milestones", "2", "--games", "2", "--game-seconds", "2", "--seed", "5"]) == 0
    again = json.loads((run / "final_pick.json").read_text())
    assert [c["name"] for c in again["candidates"]] == [f"main@{s * steps}" for s in (3, 4)]
    assert (again["games_per_anchor"], again["game_seconds"], again["seed"]) == (2, 2.0, 5)
    assert json.loads((run / "best.json").read_text())["name"] == again["picked"]["name"]

    # the own-goal veto on the same run: the shipped bot plays the idle car first
    shipped = again["picked"]["name"]
    assert (
        main(["pick", str(run), "--by", "own_goal_veto", "--milestones", "2", "--games", "2", "--game-seconds", "2"])
        == 0
    )
    veto = json.loads((run / "final_pick.json").read_text())
    assert veto["by"] == "own_goal_veto" and veto["candidates"][0]["name"] == shipped
    assert all(set(c["games"]) == {IDLE_PLAYER} for c in veto["candidates"])
    assert json.loads((run / "best.json").read_text())["name"] == veto["picked"]["name"]


def test_pick_of_a_folder_that_is_no_run_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from speedflip.cli import main

    assert main(["pick", str(tmp_path / "missing")]) != 0
    err = capsys.readouterr().err
    joined = " ".join(err.split())  # the console wraps the line where the path's length puts the break
    assert "is not a run directory with rated milestones" in joined and "Traceback" not in err
    assert main(["pick", str(tmp_path), "--milestones", "0"]) != 0
    err = capsys.readouterr().err
    assert "--milestones must be at least 1" in err and "Traceback" not in err


def _vetoed(step: int, own_goals: int, games: int = 8) -> Candidate:
    return Candidate(f"main@{step}", step, Path(str(step)), {IDLE_PLAYER: 8.0}, {IDLE_PLAYER: games},
                     {IDLE_PLAYER: own_goals})  # fmt: skip


def test_the_veto_plays_the_shipped_bot_first_then_the_newest() -> None:
    last = [Path("m/300"), Path("m/400"), Path("m/500")]
    assert [p.name for p in veto_order(Path("m/400"), last)] == ["400", "500", "300"]
    assert [p.name for p in veto_order(Path("m/100"), last)] == ["100", "500", "400", "300"]  # an older shipped bot
    assert [p.name for p in veto_order(None, last)] == ["500", "400", "300"]


def test_the_first_milestone_without_an_own_goal_ships() -> None:
    assert pick_without_own_goal([_vetoed(400, 0), _vetoed(500, 0)]).step == 400  # the shipped bot stays
    assert pick_without_own_goal([_vetoed(500, 3), _vetoed(400, 1), _vetoed(300, 0)]).step == 300
    # every one scored some: the fewest (1), of the two with 1 the newer
    assert pick_without_own_goal([_vetoed(500, 3), _vetoed(400, 1), _vetoed(300, 1)]).step == 400
    with pytest.raises(ValueError, match="no candidates"):
        pick_without_own_goal([])


def test_the_veto_replaces_a_shipped_bot_that_scores_on_itself(
    tmp_path: Path, run_1v1: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Own goals decided here (idle_own_goals replaced): the shipped 500 scores 3 against the idle car, 400 one,
    300 none: 300 ships and the games stop there (200 never plays); best.json keeps the stage's best score."""
    source = next((run_1v1 / "checkpoints").iterdir())
    run, league = _run_with_milestones(tmp_path, source, [200, 300, 400, 500], rated=[200, 300, 400, 500])
    write_best(run, BestMilestone("milestones/main/500", "main@500", 500, 500.0, "main", anchor_score=0.8,
                                  stage_best_score=0.9))  # fmt: skip
    own_goals = {"500": 3, "400": 1, "300": 0, "200": 0}
    played: list[tuple[str, int, float, int]] = []

    def fake(path: Path, env: object, games: int, seconds: float, seed: int) -> tuple[int, float]:
        played.append((path.name, games, seconds, seed))
        return own_goals[path.name], 6.5

    monkeypatch.setattr(final_pick_module, "idle_own_goals", fake)
    cfg = tiny_config(selfplay={"final_pick_milestones": 4, "final_pick_games": 8, "final_pick_game_seconds": 5.0,
                                "final_pick_by": "own_goal_veto"})  # fmt: skip
    pick = final_pick(run, "main", league, cfg.env, cfg.selfplay, seed=11)

    assert pick is not None and pick.by == "own_goal_veto"
    assert played == [("500", 8, 5.0, 11), ("400", 8, 5.0, 11), ("300", 8, 5.0, 11)]
    assert pick.picked.name == "main@300"
    best = read_best(run)
    assert best is not None
    assert (best.name, best.path, best.step, best.elo) == ("main@300", "milestones/main/300", 300, 300.0)
    assert best.anchor_score is None and best.stage_best_score == pytest.approx(0.9)
    record = json.loads((run / "final_pick.json").read_text())
    assert record["by"] == "own_goal_veto" and record["picked"]["name"] == "main@300"
    assert [c["own_goals"] for c in record["candidates"]] == [{IDLE_PLAYER: 3}, {IDLE_PLAYER: 1}, {IDLE_PLAYER: 0}]

    # a clean shipped bot stays, best.json untouched (its anchor score kept)
    write_best(run, BestMilestone("milestones/main/400", "main@400", 400, 400.0, "main", anchor_score=0.8))
    own_goals["400"] = 0
    played.clear()
    pick = final_pick(run, "main", league, cfg.env, cfg.selfplay, seed=11)
    assert pick is not None and pick.picked.name == "main@400" and [p[0] for p in played] == ["400"]
    best = read_best(run)
    assert best is not None and best.name == "main@400" and best.anchor_score == pytest.approx(0.8)


def test_real_games_against_the_idle_car_count_own_goals(tmp_path: Path, run_1v1: Path) -> None:
    """The veto's games are seeded: the same milestone gives the same own goals and points twice, and own goals
    are at most the goals it conceded (every game's points are 0, 0.5 or 1)."""
    source = next((run_1v1 / "checkpoints").iterdir())
    cfg = tiny_config()
    first = idle_own_goals(source, cfg.env, 4, 3.0, 2)
    assert first == idle_own_goals(source, cfg.env, 4, 3.0, 2)
    own_goals, points = first
    assert own_goals >= 0 and 0.0 <= points <= 4.0 and (2 * points) == int(2 * points)
