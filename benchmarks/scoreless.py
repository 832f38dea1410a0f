"""Where a bot's wins go: the games of ``speedflip eval --json`` reports in which it did not score.

A 60-second game is won by scoring more goals than the opponent in 60 seconds, so a bot that outplays its
opponent but scores slowly draws. This reads one or more evaluation reports (``speedflip eval ... --json F``;
``benchmarks/skill_curve.py`` writes them under ``RUN/eval/``) and prints per report: wins / draws / losses, the
games in which the bot (player A) scored no goal, the goalless draws (0:0), and goals per game for and against.
A draw that is 0:0 is a game the bot could only have won by scoring; against the idle car every draw is one.

Usage::

    python benchmarks/scoreless.py /tmp/skill/P-s1/seed1/eval/30min-idle-stochastic.json [...] [--json F]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from speedflip.selfplay.match import GameResult, summarize


@dataclass(frozen=True)
class Scoring:
    """One evaluation report's games, counted (see the module docstring)."""

    report: str
    player_b: str
    action_mode: str
    games: int
    wins: int
    draws: int
    losses: int
    scoreless: int  # games in which player A scored no goal
    goalless_draws: int  # 0:0
    goals_per_game_a: float
    goals_per_game_b: float


def count(report: dict[str, Any], name: str) -> Scoring:
    """The counts of one report (its ``games_detail``: one :class:`GameResult` record per game), by the
    summary ``speedflip eval`` prints, plus the 0:0 draws."""
    games = report.get("games_detail")
    if not isinstance(games, list) or not games:
        raise ValueError(f"'{name}' has no games_detail: give a report written by `speedflip eval ... --json F`")
    names = {f.name for f in fields(GameResult)}
    results = [GameResult(**{k: v for k, v in g.items() if k in names}) for g in games]
    summary = summarize(results)
    return Scoring(
        report=name,
        player_b=str(report.get("player_b", "?")),
        action_mode=str(report.get("action_mode", "deterministic")),
        games=summary.games,
        wins=summary.wins,
        draws=summary.draws,
        losses=summary.losses,
        scoreless=summary.scoreless_a,
        goalless_draws=sum(r.goals_a == 0 and r.goals_b == 0 for r in results),
        goals_per_game_a=summary.goals_a / summary.games,
        goals_per_game_b=summary.goals_b / summary.games,
    )


def line(s: Scoring) -> str:
    return (
        f"{s.report}  vs {s.player_b} ({s.action_mode}): {s.wins} / {s.draws} / {s.losses} of {s.games}; "
        f"A scored none in {s.scoreless}, 0:0 {s.goalless_draws}; goals per game {s.goals_per_game_a:.2f} : "
        f"{s.goals_per_game_b:.2f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path, help="JSON reports of `speedflip eval ... --json F`")
    parser.add_argument("--json", type=Path, help="also write the counts here")
    args = parser.parse_args(argv)
    counted = []
    for path in args.reports:
        try:
            counted.append(count(json.loads(path.read_text()), str(path)))
        except (OSError, json.JSONDecodeError, ValueError, KeyError, TypeError) as err:
            print(f"error: cannot read '{path}': {err}", file=sys.stderr)
            return 2
    for s in counted:
        print(line(s))
    if args.json:
        args.json.write_text(json.dumps([asdict(s) for s in counted], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
