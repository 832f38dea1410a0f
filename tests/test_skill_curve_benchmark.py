"""benchmarks/skill_curve.py: which policies a seed's evaluation plays (no games played)."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from benchmark_modules import load_benchmark


@pytest.fixture
def skill_curve() -> ModuleType:
    return load_benchmark("skill_curve")


def test_a_policy_is_evaluated_once_whether_newest_or_shipped(
    skill_curve: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # snapshots at 2M (shipped: the 1M milestone), 4M (shipped: the 2M milestone) and the final 6M (shipped: 6M)
    shipped_by_step = {2_000_000: 1_000_000, 4_000_000: 2_000_000, 6_000_000: 6_000_000}
    played: list[tuple[int, bool, int]] = []

    def shipped_at(rated: object, run_dir: Path, agent_steps: int) -> dict[str, Any]:
        step = shipped_by_step[agent_steps]
        return {"name": f"main@{step}", "agent_steps": step, "elo": 1000.0, "path": str(run_dir / str(step))}

    def evaluate_snapshot(snap: dict[str, Any], games: int, *rest: object, shipped: bool = False) -> dict[str, Any]:
        step = snap["shipped"]["agent_steps"] if shipped else snap["agent_steps"]
        played.append((step, shipped, games))
        snap["shipped_results" if shipped else "results"] = {"rule": {"deterministic": {"win_rate": step / 1e7}}}
        return snap["shipped_results" if shipped else "results"]

    monkeypatch.setattr(skill_curve, "rated_milestones", lambda run_dir: [])
    monkeypatch.setattr(skill_curve, "shipped_at", shipped_at)
    monkeypatch.setattr(skill_curve, "evaluate_snapshot", evaluate_snapshot)
    monkeypatch.setattr(skill_curve, "check_best_file", lambda run_dir, snap: None)
    snapshots = [
        {"seed": 1, "minute": minute, "agent_steps": step, "path": f"ckpt{step}", "final": minute == 30}
        for minute, step in ((10, 2_000_000), (20, 4_000_000), (30, 6_000_000))
    ]
    result = {"run_dir": str(tmp_path), "snapshots": snapshots}
    args = argparse.Namespace(games=40, games_final=100)
    skill_curve.evaluate_seed(result, args, tmp_path, lambda: None)
    # 2M newest, 1M shipped, 4M newest, the 2M milestone again (40 games, as before: reused), 6M once
    assert played == [(2_000_000, False, 40), (1_000_000, True, 40), (4_000_000, False, 40), (6_000_000, False, 100)]
    final = snapshots[-1]
    assert final["shipped_results"] is final["results"]  # the final policy is the shipped bot: the same games
    assert snapshots[1]["shipped_results"] is snapshots[0]["results"]


def test_the_clock_or_a_step_count_ends_the_run(skill_curve: ModuleType) -> None:
    timed = skill_curve.parse_args(["--minutes", "30", "--set", "ppo.learning_rate=1e-4"])
    sets = skill_curve.train_settings(timed, 2)
    assert sets == [
        "run.seed=2", "run.checkpoint_interval_steps=250000", f"run.total_steps={skill_curve.NO_LIMIT_STEPS}",
        "run.time_budget_minutes=30.0", "ppo.learning_rate=1e-4",
    ]  # fmt: skip
    by_steps = skill_curve.parse_args(["--steps", "22437888", "--minutes", "50"])
    assert "run.total_steps=22437888" in skill_curve.train_settings(by_steps, 1)
    assert "run.time_budget_minutes=50.0" in skill_curve.train_settings(by_steps, 1)  # the cap stays
    with pytest.raises(SystemExit):
        skill_curve.parse_args(["--steps", "0"])
