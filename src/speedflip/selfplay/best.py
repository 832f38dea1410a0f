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

A 16-game anchor score is noisy (one standard deviation about 0.1), so with ``selfplay.ship_margin`` (0.1)
a newer milestone is shipped when its anchor score is within that margin of the best anchor score of the
stage so far: the newest near-best milestone ships, not an older one that was lucky in its 16 games (the
final policies of self-play runs against the rule bot beat the milestones picked by the highest score,
docs/learning.md, twentieth session). The margin is measured from the stage's best score, which
``best.json`` keeps (``stage_best_score``), so a run cannot drift down one margin at a time.

``best.json`` holds the milestone's path relative to the run directory (a run can be moved), its step,
Elo and anchor score at rating time, stage and training minutes. It is replaced atomically; a milestone
of a new curriculum stage replaces the best of the previous stage (ratings of different team sizes do
not compare).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

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
    stage_best_score: float | None = None  # the best anchor score of the stage up to this milestone (ship_margin)

    def folder(self, run_dir: Path) -> Path:
        return run_dir / self.path

    def describe(self) -> str:
        minutes = f", {self.train_minutes:.1f} min" if self.train_minutes is not None else ""
        anchors = f"{self.anchor_score:.2f} vs rule+idle, " if self.anchor_score is not None else ""
        return f"{self.name} ({anchors}{self.elo:.0f} Elo{minutes})"

    def beats(self, other: BestMilestone, ship_by: ShipBy, margin: float = 0.0) -> bool:
        """Whether this (newer) milestone should be shipped instead of ``other`` (same stage).

        ``anchor_score`` with ``margin`` > 0: its anchor score is at least the stage's best so far (``other``'s
        ``stage_best_score``, else ``other``'s own score) minus ``margin``; with ``margin`` 0: a higher anchor
        score (equal: a higher Elo). ``elo``: a higher Elo. When either lacks an anchor score (a ``best.json``
        written before it was recorded) Elo decides."""
        if ship_by == "anchor_score" and self.anchor_score is not None and other.anchor_score is not None:
            if margin > 0:
                return self.anchor_score >= other.reference_score() - margin
            return (self.anchor_score, self.elo) > (other.anchor_score, other.elo)
        return self.elo > other.elo

    def reference_score(self) -> float:
        """The best anchor score of the stage up to this milestone (its own when not recorded)."""
        own = self.anchor_score if self.anchor_score is not None else 0.0
        return own if self.stage_best_score is None else max(own, self.stage_best_score)


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
            stage_best_score=None if data.get("stage_best_score") is None else float(data["stage_best_score"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def next_best(
    current: BestMilestone | None, candidate: BestMilestone, ship_by: ShipBy = "anchor_score", margin: float = 0.0
) -> BestMilestone | None:
    """What ``best.json`` should name once ``candidate`` (a newer milestone) is rated: ``candidate``, carrying
    the stage's best anchor score so far (``stage_best_score``), when it :meth:`~BestMilestone.beats`
    ``current`` of the same stage by ``ship_by`` and ``margin`` or ``current`` is of another stage or missing;
    ``None`` when ``current`` stays (by ``anchor_score`` the candidate then scored below the stage's best, so
    the best score ``current`` carries still holds; ``elo`` does not use it)."""
    same_stage = current is not None and current.stage == candidate.stage
    if candidate.anchor_score is not None:
        so_far = current.reference_score() if same_stage and current is not None else candidate.anchor_score
        candidate = replace(candidate, stage_best_score=max(so_far, candidate.anchor_score))
    if same_stage and current is not None and not candidate.beats(current, ship_by, margin):
        return None
    return candidate


def update_best(run_dir: Path, candidate: BestMilestone, ship_by: ShipBy = "anchor_score", margin: float = 0.0) -> bool:
    """Make ``candidate`` (a newer milestone) the run's best when :func:`next_best` says so (the current best
    missing or unreadable counts as missing). Returns whether it did."""
    new = next_best(read_best(run_dir), candidate, ship_by, margin)
    if new is None:
        return False
    write_best(run_dir, new)
    return True


def write_best(run_dir: Path, best: BestMilestone) -> None:
    """Make ``best`` the run's shipped bot, whatever ``best.json`` named before (replaced atomically)."""
    write_run_json(run_dir, BEST_FILE, asdict(best))


def write_run_json(run_dir: Path, name: str, data: dict[str, Any]) -> None:
    """Write ``run_dir/name`` as indented JSON, replacing the old file atomically (a temporary file beside it)."""
    tmp = run_dir / f".{name}.tmp"
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, run_dir / name)


def run_relative(path: Path, run_dir: Path) -> str:
    """``path`` as ``best.json`` records it: relative to the run directory (a run can be moved), absolute when it
    lies outside."""
    try:
        return str(path.relative_to(run_dir))
    except ValueError:
        return str(path.resolve())


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
