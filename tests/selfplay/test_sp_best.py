"""The shipped bot: ``best.json`` (the best-rated milestone) and how eval/export/--from find it."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from speedflip.checkpoint import CheckpointError
from speedflip.selfplay.best import BEST_FILE, BestMilestone, best_checkpoint, next_best, read_best, update_best
from speedflip.selfplay.evaluate import league_dir_for, shipped_note
from speedflip.selfplay.policies import find_checkpoint
from speedflip.train.warmstart import StartFromError, resolve_start


def _best(step: int, elo: float, stage: str = "main") -> BestMilestone:
    return BestMilestone(f"milestones/{stage}/{step}", f"{stage}@{step}", step, elo, stage, train_minutes=1.5)


def test_update_best_keeps_the_highest_rating_of_the_current_stage(tmp_path: Path) -> None:
    assert read_best(tmp_path) is None
    assert update_best(tmp_path, _best(100, 700.0))
    assert not update_best(tmp_path, _best(200, 650.0))  # lower: stays
    assert not update_best(tmp_path, _best(300, 700.0))  # equal: the earlier one stays
    assert read_best(tmp_path) == _best(100, 700.0)
    assert update_best(tmp_path, _best(400, 701.0))
    assert read_best(tmp_path) == _best(400, 701.0)
    # a new curriculum stage replaces the best of the previous one, even rated lower (other team size)
    assert update_best(tmp_path, _best(500, 300.0, stage="1v2"))
    assert read_best(tmp_path) == _best(500, 300.0, stage="1v2")
    assert [p.name for p in tmp_path.iterdir()] == [BEST_FILE]  # no temporary file left behind
    assert json.loads((tmp_path / BEST_FILE).read_text())["train_minutes"] == 1.5


def test_a_damaged_best_file_is_ignored_and_replaced(tmp_path: Path) -> None:
    (tmp_path / BEST_FILE).write_text("{not json")
    assert read_best(tmp_path) is None
    (tmp_path / BEST_FILE).write_text(json.dumps({"path": "x"}))  # fields missing
    assert read_best(tmp_path) is None
    assert update_best(tmp_path, _best(100, 500.0))
    assert read_best(tmp_path) == _best(100, 500.0)


def _run_with_best(tmp_path: Path, run_1v1: Path) -> tuple[Path, Path, Path]:
    """A run dir holding the tiny checkpoint, a milestone copy of it at step 1, and best.json naming it."""
    run = tmp_path / "run"
    shutil.copytree(run_1v1, run)
    newest = find_checkpoint(str(run))
    milestone = run / "milestones" / "main" / "1"
    shutil.copytree(newest, milestone)  # verifies: the folder name is not part of the checksum
    update_best(run, BestMilestone("milestones/main/1", "main@1", 1, 720.0, "main"))
    return run, newest, milestone


def test_a_run_dir_plays_its_best_milestone_and_run_at_latest_its_newest_checkpoint(
    tmp_path: Path, run_1v1: Path
) -> None:
    run, newest, milestone = _run_with_best(tmp_path, run_1v1)
    assert best_checkpoint(run) == milestone
    assert find_checkpoint(str(run)) == milestone
    assert find_checkpoint(f"{run}@best") == milestone
    assert find_checkpoint(f"{run}@latest") == newest
    assert league_dir_for(f"{run}@latest", None) == run / "league.json"
    note = shipped_note(str(run))
    assert note is not None and "main@1 (720 Elo)" in note and "@latest" in note
    assert shipped_note(f"{run}@latest") is None and shipped_note("rule") is None
    assert resolve_start(f"{run}@best").path == milestone.resolve()
    assert resolve_start(f"{run}@best").kind == "best-rated milestone"
    assert resolve_start(str(run)).path == newest.resolve()  # --from RUN stays "its newest checkpoint"


def test_a_best_milestone_that_does_not_verify_falls_back_to_the_newest_checkpoint(
    tmp_path: Path, run_1v1: Path
) -> None:
    run, newest, milestone = _run_with_best(tmp_path, run_1v1)
    weights = next(p for p in milestone.iterdir() if p.suffix == ".safetensors")
    weights.write_bytes(weights.read_bytes()[:-8] + b"damaged!")
    assert best_checkpoint(run) is None
    assert find_checkpoint(str(run)) == newest  # never a damaged policy
    with pytest.raises(CheckpointError, match=r"no rated milestone that verifies.*@latest"):
        find_checkpoint(f"{run}@best")


def test_run_at_best_without_ratings_says_what_to_use(tmp_path: Path, run_1v1: Path) -> None:
    run = tmp_path / "plain"
    shutil.copytree(run_1v1, run)
    with pytest.raises(CheckpointError, match=r"@latest for its newest checkpoint"):
        find_checkpoint(f"{run}@best")
    with pytest.raises(StartFromError, match=r"no rated milestone"):
        resolve_start(f"{run}@best")
    with pytest.raises(CheckpointError, match=r"run directory '.*nope' does not exist"):
        find_checkpoint(f"{tmp_path / 'nope'}@latest")
    assert find_checkpoint(f"{run}@latest") == find_checkpoint(str(run))


@pytest.mark.parametrize("ship_by", ["elo", "anchor_score", None])
def test_the_skill_benchmark_rebuilds_the_same_choice_from_games_csv(tmp_path: Path, ship_by: str | None) -> None:
    """benchmarks/skill_curve.py scores runs made before best.json existed by rebuilding the choice from
    games.csv; it must pick what update_best picks under the run's selfplay.ship_by (a config.yaml without
    the key: a run from before the setting, Elo), as of any step."""
    import csv
    import importlib.util

    import yaml

    spec = importlib.util.spec_from_file_location(
        "skill_curve", Path(__file__).parents[2] / "benchmarks" / "skill_curve.py"
    )
    assert spec is not None and spec.loader is not None
    skill_curve = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(skill_curve)
    selfplay = {} if ship_by is None else {"ship_by": ship_by}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"selfplay": selfplay}))

    # (step, stage, [(opponent, score, rating after the game)]): the last rating is its Elo
    rated = [
        (100, "main", [("rule", 0.0, 600.0), ("idle", 1.0, 640.0)]),  # anchors 0.5
        (200, "main", [("rule", 0.5, 700.0), ("idle", 1.0, 690.0)]),  # anchors 0.75, Elo 690
        (300, "main", [("rule", 1.0, 650.0), ("idle", 1.0, 689.0)]),  # anchors 1.0, Elo 689
        (400, "main", [("rule", 0.0, 720.0), ("idle", 0.5, 700.0), ("main@300", 1.0, 710.0)]),  # 0.25, Elo 710
        (500, "1v2", [("rule", 0.0, 400.0), ("idle", 0.0, 420.0)]),
        (600, "1v2", [("rule", 0.5, 380.0), ("idle", 0.5, 410.0)]),
    ]
    with (tmp_path / "games.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["step", "player_a", "player_b", "score_a", "rating_a"])
        writer.writerow([150, "learner", "main@100", 1.0, 990.0])  # a pool game: not a rating
        for step, stage, games in rated:
            for opponent, score, rating in games:
                writer.writerow([step, f"{stage}@{step}", opponent, score, rating])
    from_csv = skill_curve.rated_milestones(tmp_path)
    assert [(m.name, m.step, m.elo) for m in from_csv][:2] == [("main@100", 100, 640.0), ("main@200", 200, 690.0)]
    assert [m.anchor_score for m in from_csv] == [0.5, 0.75, 1.0, 0.25, 0.0, 0.5]  # games vs main@300 not counted
    by = ship_by or "elo"
    shipped = {}
    for step, stage, games in rated:
        points = [score for opponent, score, _ in games if opponent in ("rule", "idle")]
        milestone = BestMilestone(f"milestones/{stage}/{step}", f"{stage}@{step}", step, games[-1][2], stage,
                                  anchor_score=sum(points) / len(points))  # fmt: skip
        update_best(tmp_path, milestone, by)
        shipped[step] = read_best(tmp_path)
    for step in (100, 250, 300, 450, 500, 650):
        expected = shipped[max(s for s, _, _ in rated if s <= step)]
        got = skill_curve.shipped_at(from_csv, tmp_path, step)
        assert expected is not None and got is not None
        assert (got["name"], got["elo"]) == (expected.name, expected.elo), step
    assert skill_curve.shipped_at(from_csv, tmp_path, 50) is None
    # computed by hand: Elo ships 200 (690 > 689) then 400 (710); the anchors ship 300 (1.0) and keep it
    main = "main@400" if by == "elo" else "main@300"
    assert [skill_curve.shipped_at(from_csv, tmp_path, s)["name"] for s in (250, 450, 650)] == [
        "main@200",
        main,
        "1v2@600" if by == "anchor_score" else "1v2@500",
    ]


def test_the_anchor_score_ships_the_milestone_that_beats_the_anchors_and_elo_breaks_ties(tmp_path: Path) -> None:
    def milestone(step: int, elo: float, anchors: float | None) -> BestMilestone:
        return BestMilestone(f"milestones/main/{step}", f"main@{step}", step, elo, "main", anchor_score=anchors)

    assert update_best(tmp_path, milestone(1, 825.0, 0.59), "anchor_score")
    assert not update_best(tmp_path, milestone(2, 828.0, 0.47), "anchor_score")  # higher Elo, worse vs the anchors
    assert not update_best(tmp_path, milestone(3, 800.0, 0.59), "anchor_score")  # equal anchors, lower Elo
    assert update_best(tmp_path, milestone(4, 830.0, 0.59), "anchor_score")  # equal anchors, higher Elo
    assert read_best(tmp_path) == replace(milestone(4, 830.0, 0.59), stage_best_score=0.59)
    assert update_best(tmp_path, milestone(5, 700.0, 0.60), "anchor_score")
    assert not update_best(tmp_path, milestone(6, 699.0, None), "anchor_score")  # no anchor score: Elo decides
    assert update_best(tmp_path, milestone(7, 701.0, None), "anchor_score")
    assert not update_best(tmp_path, milestone(8, 700.0, 0.9), "elo")  # by Elo the anchor score does not count
    assert read_best(tmp_path) == milestone(7, 701.0, None)
    assert "0.60 vs rule+idle, 700 Elo" in milestone(5, 700.0, 0.60).describe()


def test_the_exported_bot_is_named_after_its_run_also_from_a_milestone(tmp_path: Path) -> None:
    from speedflip.export.exporter import run_name

    assert run_name(tmp_path / "myrun" / "checkpoints" / "500") == "myrun"
    assert run_name(tmp_path / "myrun" / "milestones" / "main" / "500") == "myrun"  # the shipped bot
    assert run_name(tmp_path / "somewhere" / "500") == "speedflip"


def test_with_a_margin_the_newest_near_best_milestone_ships_measured_from_the_stage_best(tmp_path: Path) -> None:
    def milestone(step: int, anchors: float, stage: str = "main") -> BestMilestone:
        return BestMilestone(f"milestones/{stage}/{step}", f"{stage}@{step}", step, 900.0, stage, anchor_score=anchors)

    def ships(step: int, anchors: float, stage: str = "main") -> bool:
        return update_best(tmp_path, milestone(step, anchors, stage), "anchor_score", margin=0.1)

    assert ships(1, 0.75)
    assert ships(2, 0.875)  # higher
    assert not ships(3, 0.75)  # 0.125 below the best: the lucky 0.875 stays
    assert ships(4, 0.78)  # within 0.1 of 0.875: the newer one ships ...
    best = read_best(tmp_path)
    assert best is not None and (best.step, best.anchor_score, best.stage_best_score) == (4, 0.78, 0.875)
    assert not ships(5, 0.77)  # ... and the margin is still measured from 0.875, not from 0.78: no drifting down
    assert ships(6, 0.95)
    assert not ships(7, 0.84) and ships(8, 0.85)  # 0.95 - 0.1 = 0.85: the bound itself ships
    assert ships(9, 0.2, stage="1v2")  # a new stage starts its own best
    best = read_best(tmp_path)
    assert best is not None and (best.step, best.stage_best_score) == (9, 0.2)
    # margin 0 is the old rule: only a higher score (or an equal one with a higher Elo) ships
    assert next_best(milestone(10, 0.8), replace(milestone(11, 0.79), elo=2000.0), "anchor_score", 0.0) is None
