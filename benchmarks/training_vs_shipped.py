"""Does the learner's training score tell how good a run's shipped bot is? A reading over many runs.

For every ``benchmarks/skill_curve.py`` output directory given (one seed each), this reads the shipped bot's
registered score (the mean of its win rates against the rule bot and the idle car, as exported and sampled, from
``skill_curve.json``; runs without sampled results are skipped) and the learner's training score against the rule bot
(``games.csv``: the first goal of each training game, 1 / 0.5 / 0) in three windows of agent steps: 4-8M, 8-10M and
the run's last 2M. It prints one row per run and the Pearson correlation of each window with the shipped score: how
much of the spread between runs the training curve tells, and how early (docs/learning.md, forty-ninth session).

Usage::

    python benchmarks/training_vs_shipped.py /tmp/skill/*-s* [--json F]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from statistics import correlation as pearson  # Pearson's r (Python >= 3.10)
from typing import Any

from learner_score import read_scores  # beside this script: the learner's training games against one opponent
from skill_curve import bot_results, run_score  # beside this script: the score the learning sessions compare runs by

WINDOWS_STEPS: tuple[tuple[str, float, float], ...] = (("4-8M", 4e6, 8e6), ("8-10M", 8e6, 10e6))


def shipped_score(skill_curve: dict[str, Any]) -> float | None:
    """The registered score (``skill_curve.run_score``) of the last snapshot's shipped bot (its own results when it
    is the final policy); None when the run has no sampled results."""
    snapshot = skill_curve["seeds"][0]["snapshots"][-1]
    return run_score(bot_results(snapshot))


def window_mean(games: list[tuple[int, float]], low_steps: float, high_steps: float) -> float:
    """Mean training score of the games logged at ``low_steps <= step < high_steps`` (nan when none)."""
    scores = [score for step, score in games if low_steps <= step < high_steps]
    return statistics.mean(scores) if scores else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="skill_curve.py output directories")
    parser.add_argument("--json", type=Path, help="write the rows and correlations here")
    args = parser.parse_args()
    rows: list[dict[str, float | str]] = []
    for run in sorted(args.runs):
        curve_file = run / "skill_curve.json"
        games_files = sorted(run.glob("seed*/games.csv"))
        if not curve_file.is_file() or not games_files:
            continue
        skill_curve = json.loads(curve_file.read_text())
        score = shipped_score(skill_curve)
        if score is None:
            continue
        last_steps = float(skill_curve["seeds"][0]["snapshots"][-1]["agent_steps"])
        games = [(step, score) for step, score, _ in read_scores(games_files[0], "rule")]
        row: dict[str, float | str] = {"run": run.name}
        for name, low, high in WINDOWS_STEPS:
            row[name] = window_mean(games, low, high)
        row["last 2M"] = window_mean(games, last_steps - 2e6, float("inf"))
        row["shipped score"] = score
        rows.append(row)
    columns = [name for name, _, _ in WINDOWS_STEPS] + ["last 2M"]
    print(f"{'run':10s} " + " ".join(f"{c:>8s}" for c in columns) + "  shipped score")
    for row in rows:
        print(f"{row['run']!s:10s} " + " ".join(f"{row[c]:8.3f}" for c in columns) + f"  {row['shipped score']:.4f}")
    scores = [float(row["shipped score"]) for row in rows]
    correlations = {c: pearson([float(row[c]) for row in rows], scores) for c in columns} if len(rows) > 2 else {}
    for column, r in correlations.items():
        print(f"training score {column}: Pearson r with the shipped score {r:.3f} over {len(rows)} runs")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "pearson_r": correlations}, indent=2))


if __name__ == "__main__":
    main()
