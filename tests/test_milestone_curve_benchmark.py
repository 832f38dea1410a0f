"""benchmarks/milestone_curve.py: which milestones it evaluates and the summary it prints (no games played)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from benchmark_modules import BENCHMARKS, load_benchmark


@pytest.fixture
def milestone_curve(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # it imports skill_curve beside it, as when run as a script
    return load_benchmark("milestone_curve")


def make_run(tmp_path: Path, steps: list[int]) -> Path:
    for step in steps:
        (tmp_path / "milestones" / "main" / str(step)).mkdir(parents=True)
    (tmp_path / "milestones" / "main" / "notes").mkdir()  # not a step folder: never a milestone
    return tmp_path


def test_choose_strides_from_a_step_adds_the_last_ones_and_respects_the_ceiling(
    milestone_curve: ModuleType, tmp_path: Path
) -> None:
    folders = milestone_curve.milestone_folders(make_run(tmp_path, [m * 1000 for m in range(10, 0, -1)]), "main")
    assert [int(p.name) for p in folders] == [m * 1000 for m in range(1, 11)]  # step order, not name order

    def steps(**kwargs: int | None) -> list[int]:
        return [int(p.name) // 1000 for p in milestone_curve.choose(folders, **kwargs)]

    # every 2nd from 5k: 5, 7, 9; the last 3: 8, 9, 10
    assert steps(from_steps=5000, until_steps=None, every=2, last=3) == [5, 7, 8, 9, 10]
    # nothing above 6.5k: strided 5; the last 2 of what is left: 5, 6
    assert steps(from_steps=5000, until_steps=6500, every=2, last=2) == [5, 6]
    assert steps(from_steps=0, until_steps=None, every=0, last=4) == [7, 8, 9, 10]


def test_summary_means_the_last_milestones_over_the_opponents(milestone_curve: ModuleType) -> None:
    def row(rule: float, idle: float) -> dict[str, dict[str, float]]:
        return {"rule": {"win_rate": rule}, "idle": {"win_rate": idle}}

    report = {
        "opponents": ["rule", "idle"],
        "runs": {
            "/r/seed0@end": {
                "last": 2,
                "until_steps": None,
                "tail": ["3000", "4000"],
                "milestones": {"1000": row(0.9, 0.9), "3000": row(0.2, 0.6), "4000": row(0.5, 0.1)},
            }
        },
    }
    text = milestone_curve.summarize(report)
    # (0.2 + 0.6) / 2 = 0.4 and (0.5 + 0.1) / 2 = 0.3: their mean 0.35; the 1000-step milestone is not in it
    assert "mean of the last 2 (*): 0.350" in text
    assert "1,000   rule 0.90 idle 0.90  mean 0.900" in text


def test_a_folder_without_milestones_is_a_clear_error(milestone_curve: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="has no milestones"):
        milestone_curve.milestone_folders(tmp_path, "main")


def test_the_eval_call_samples_only_when_asked(milestone_curve: ModuleType, tmp_path: Path) -> None:
    argmax = milestone_curve.eval_command(Path("/r/m/1000"), "rule", 40, 0, False, tmp_path)
    sampled = milestone_curve.eval_command(Path("/r/m/1000"), "rule", 40, 0, True, tmp_path)
    assert "--stochastic" not in argmax and sampled[-1] == "--stochastic" and sampled[:-1] == argmax
    assert argmax[argmax.index("--games") + 1] == "40"
    assert argmax[argmax.index("--json") + 1] == str(tmp_path / "eval.json")


def test_a_report_is_continued_only_in_its_own_action_mode(milestone_curve: ModuleType) -> None:
    old = {"opponents": ["rule", "idle"], "games": 40}  # written before the mode was recorded: deterministic
    assert milestone_curve.resume_mismatch(old, ["rule", "idle"], 40, False) is None
    assert milestone_curve.resume_mismatch(old, ["rule", "idle"], 40, True) == "deterministic play, not stochastic"
    sampled = {**old, "action_mode": "stochastic"}
    assert milestone_curve.resume_mismatch(sampled, ["rule", "idle"], 40, True) is None
    assert milestone_curve.resume_mismatch(sampled, ["rule"], 40, True) == "other opponents or game counts"
    assert "(stochastic; last 2" in milestone_curve.summarize({**sampled, "runs": {"/r@end": {
        "last": 2, "until_steps": None, "tail": [], "milestones": {}}}})  # fmt: skip
