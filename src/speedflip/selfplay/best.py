"""The bot a run ships: its best-rated milestone (``RUN/best.json``).

Self-play does not improve monotonically: the newest policy can be much weaker than one from minutes
earlier (it specialised against its own latest self). Every milestone gets rating games as training goes
(:mod:`speedflip.selfplay.rating`: against the rule bot, the idle car and earlier milestones), so the run
remembers the best of its current curriculum stage in ``best.json``, and ``speedflip eval RUN``,
``speedflip export RUN`` and ``speedflip watch RUN`` use it. ``RUN@latest`` names the newest checkpoint
instead, ``RUN@best`` insists on the best-rated milestone.

Which is best is ``selfplay.ship_by``: ``anchor_score``, the score rate in the rating games against the two
fixed anchors (the rule bot and the idle car; Elo breaks ties), or ``elo``, the milestone's Elo, which
also counts its games against earlier milestones. Elo rewards beating one's own past (and its prior
starts from the previous milestone's rating), so a milestone that beat its predecessors and lost to an
idle car could be shipped; the anchors are what a user plays the bot against (docs/learning.md,
sixteenth session).

``best.json`` holds the milestone's path relative to the run directory (a run can be moved), its step,
Elo and anchor score at rating time, stage and training minutes. It is replaced atomically; a milestone
of a new curriculum stage replaces the best of the previous stage (ratings of different team sizes do
not compare).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from speedflip.checkpoint import CheckpointError, verify_checkpoint

BEST_FILE = "best.json"
ShipBy = Literal["anchor_score", "elo"]


@dataclass(frozen=True)
class BestMilestone:
    """The highest-rated milestone of a run's current stage so far."""

    path: str  # relative to the run directory
    name: str  # league name, e.g. main@8003584
    step: int
    elo: float
    stage: str
    train_minutes: float | None = None
    anchor_score: float | None = None  # score rate vs the rule bot and the idle car in its rating games

    def folder(self, run_dir: Path) -> Path:
        return run_dir / self.path

    def describe(self) -> str:
        minutes = f", {self.train_minutes:.1f} min" if self.train_minutes is not None else ""
        anchors = f"{self.anchor_score:.2f} vs rule+idle, " if self.anchor_score is not None else ""
        return f"{self.name} ({anchors}{self.elo:.0f} Elo{minutes})"

    def beats(self, other: BestMilestone, ship_by: ShipBy) -> bool:
        """Whether this milestone should be shipped instead of ``other`` (same stage): a higher anchor score
        (equal: a higher Elo) for ``anchor_score``, a higher Elo for ``elo``. When either lacks an anchor
        score (a ``best.json`` written before it was recorded) Elo decides."""
        if ship_by == "anchor_score" and self.anchor_score is not None and other.anchor_score is not None:
            return (self.anchor_score, self.elo) > (other.anchor_score, other.elo)
        return self.elo > other.elo


def read_best(run_dir: Path) -> BestMilestone | None:
    """The run's best-rated milestone, or ``None`` (no ``best.json``, or one that cannot be read)."""
    try:
        data = json.loads((run_dir / BEST_FILE).read_text())
        return BestMilestone(
            path=str(data["path"]),
            name=str(data["name"]),
            step=int(data["step"]),
            elo=float(data["elo"]),
            stage=str(data["stage"]),
            train_minutes=None if data.get("train_minutes") is None else float(data["train_minutes"]),
            anchor_score=None if data.get("anchor_score") is None else float(data["anchor_score"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def update_best(run_dir: Path, candidate: BestMilestone, ship_by: ShipBy = "anchor_score") -> bool:
    """Make ``candidate`` the run's best when it :meth:`~BestMilestone.beats` the current best of the same
    stage, or when the current best is of another stage, missing or unreadable (an equal one does not
    replace it). Returns whether it did."""
    current = read_best(run_dir)
    if current is not None and current.stage == candidate.stage and not candidate.beats(current, ship_by):
        return False
    tmp = run_dir / f".{BEST_FILE}.tmp"
    tmp.write_text(json.dumps(asdict(candidate), indent=2) + "\n")
    os.replace(tmp, run_dir / BEST_FILE)
    return True


def best_checkpoint(run_dir: Path) -> Path | None:
    """The folder of the run's best-rated milestone when it exists and verifies, else ``None``."""
    best = read_best(run_dir)
    if best is None:
        return None
    folder = best.folder(run_dir)
    try:
        verify_checkpoint(folder)
    except CheckpointError:
        return None
    return folder
