"""kill -9 the trainer at random moments (half of them inside a checkpoint save) and resume each time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faults_helpers import INTERVAL, checkpoint_dirs, independently_good, kill_loop, tmp_folders

KILLS = 5


def test_kill_9_at_random_moments_then_resume(tmp_path: Path, figures: dict[str, Any]) -> None:
    run = tmp_path / "run"
    report = kill_loop(run, kills=KILLS, seed=20261122)
    figures["kill -9 loop (test)"] = report.summary()
    assert report.failures == [], "\n".join(report.failures)
    assert report.tried == report.survived == KILLS
    assert report.mid_save >= 1, "no kill landed inside a checkpoint save"
    assert report.corrupt_loaded == 0
    assert len(report.steps_lost) == KILLS and max(report.steps_lost) <= INTERVAL
    # the run finished: its last checkpoint verifies, every numbered folder verifies, and the unfinished
    # saves of killed processes are still only hidden .tmp-* folders
    assert all(independently_good(p) for p in checkpoint_dirs(run))
    assert all(p.name.startswith(".tmp-") for p in tmp_folders(run))
