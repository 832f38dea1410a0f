"""The learner's own score in its training games against a pool opponent (default: the rule bot), per run.

Every pool game a run plays is logged in ``games.csv`` (``player_a`` = ``learner``, ``score_a`` 1 / 0.5 / 0).
Thousands of them are played in a 30-minute ``1v1`` run, so their mean is a far less noisy reading of how well
the learner plays, sampling its actions as in training, than 100 evaluation games of one checkpoint. This
prints, per run directory: the mean score from ``--from-steps`` agent steps on (with its standard error and the
number of games), the mean by bins of ``--bin-steps``, the training goals per agent-minute over the same span
(``charts/goals_per_minute`` of ``metrics.jsonl``), the median approximate KL of the updates over the span
(``losses/approx_kl``: how far each update moved the policy; PPO updates usually aim near 0.01), the policy's
entropy at the last iteration, and the learning rate at the first and last iteration.
Runs that log each game's length (``games.csv`` "seconds", written since the twenty-eighth session) also give the
share of those games the learner won with a goal within ``--game-seconds`` (default 60) and the share decided by a
goal of either side within it: a training game ends at its first goal, so these are the training side's readings of
what a 60-second evaluation game asks (scoring within the minute), where the score counts first goals whenever they
come. ``--json`` writes the same, ``--plot`` a PNG of the binned score against agent steps (one line per run).

Usage::

    python benchmarks/learner_score.py /tmp/skill/P-s1/seed1 /tmp/skill/H19-s1/seed1 --plot learner.png
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class LearnerScore:
    """One run's reading (see the module docstring); ``None`` where the run has no such games or records."""

    run: str
    opponent: str
    from_steps: int
    steps: int
    games: int
    score: float | None
    stderr: float | None
    bins: list[tuple[int, float, int]] = field(default_factory=list)  # (bin start in agent steps, mean, games)
    goals_per_minute: float | None = None
    learning_rate_first: float | None = None
    learning_rate_last: float | None = None
    update_kl_median: float | None = None  # median losses/approx_kl of the iterations from from_steps on
    entropy_last: float | None = None  # losses/entropy of the last iteration
    game_seconds: float = 60.0
    timed_games: int = 0  # games from from_steps whose length games.csv records
    won_within: float | None = None  # share of the timed games the learner won by a goal within game_seconds
    goal_within: float | None = None  # share of the timed games a goal (either side) ended within game_seconds


def read_scores(games_csv: Path, opponent: str) -> list[tuple[int, float, float | None]]:
    """(agent step, learner's score, game length in seconds or ``None``) of every training game of the learner
    against ``opponent``."""
    with games_csv.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = {"step", "player_a", "player_b", "score_a"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"{games_csv} has no column {', '.join(sorted(missing))}: not a speedflip games.csv")
        return [
            (int(row["step"]), float(row["score_a"]), float(row["seconds"]) if row.get("seconds") else None)
            for row in reader
            # rows with match statistics are periodic evaluation games (selfplay.eval_interval_steps), not training
            if row["player_a"] == "learner" and row["player_b"] == opponent and not row.get("touches_a")
        ]


def mean_and_stderr(scores: list[float]) -> tuple[float | None, float | None]:
    """The mean and its standard error (sample standard deviation / sqrt(n)); ``None`` without games."""
    n = len(scores)
    if n == 0:
        return None, None
    mean = sum(scores) / n
    if n == 1:
        return mean, None
    variance = sum((s - mean) ** 2 for s in scores) / (n - 1)
    return mean, math.sqrt(variance / n)


def binned(games: list[tuple[int, float, float | None]], bin_steps: int) -> list[tuple[int, float, int]]:
    """(bin start, mean score, games) for every bin of ``bin_steps`` agent steps that has games, in order."""
    bins: dict[int, list[float]] = {}
    for step, score, _ in games:
        bins.setdefault(step // bin_steps, []).append(score)
    return [(k * bin_steps, sum(v) / len(v), len(v)) for k, v in sorted(bins.items())]


def read_records(metrics_jsonl: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in metrics_jsonl.read_text().splitlines() if line.strip()]


def within(games: list[tuple[int, float, float | None]], game_seconds: float) -> tuple[int, float | None, float | None]:
    """(timed games, share won by the learner's goal within ``game_seconds``, share ended by any goal within it)
    over the games that record their length; the shares are ``None`` when none does."""
    timed = [(score, seconds) for _, score, seconds in games if seconds is not None]
    if not timed:
        return 0, None, None
    won = sum(1 for score, seconds in timed if score == 1.0 and seconds <= game_seconds)
    decided = sum(1 for score, seconds in timed if score != 0.5 and seconds <= game_seconds)
    return len(timed), won / len(timed), decided / len(timed)


def learner_score(
    run_dir: Path,
    opponent: str = "rule",
    from_steps: int = 5_000_000,
    bin_steps: int = 2_000_000,
    game_seconds: float = 60.0,
) -> LearnerScore:
    """The reading of one run directory (``games.csv`` and ``metrics.jsonl``)."""
    games_csv, metrics = run_dir / "games.csv", run_dir / "metrics.jsonl"
    if not games_csv.is_file():
        raise FileNotFoundError(f"{games_csv} does not exist: pass a run directory that played pool games")
    games = read_scores(games_csv, opponent)
    span = [g for g in games if g[0] >= from_steps]
    score, stderr = mean_and_stderr([s for _, s, _ in span])
    timed, won_within, goal_within = within(span, game_seconds)
    records = read_records(metrics) if metrics.is_file() else []
    goals = [r["charts/goals_per_minute"] for r in records
             if r.get("global_step", 0) >= from_steps and r.get("charts/goals_per_minute") is not None]  # fmt: skip
    rates = [r["charts/learning_rate"] for r in records if r.get("charts/learning_rate") is not None]
    kls = [r["losses/approx_kl"] for r in records
           if r.get("global_step", 0) >= from_steps and r.get("losses/approx_kl") is not None]  # fmt: skip
    entropies = [r["losses/entropy"] for r in records if r.get("losses/entropy") is not None]
    return LearnerScore(
        run=str(run_dir),
        opponent=opponent,
        from_steps=from_steps,
        steps=int(records[-1]["global_step"]) if records else 0,
        games=len(span),
        score=score,
        stderr=stderr,
        bins=binned(games, bin_steps),
        goals_per_minute=sum(goals) / len(goals) if goals else None,
        learning_rate_first=rates[0] if rates else None,
        learning_rate_last=rates[-1] if rates else None,
        update_kl_median=statistics.median(kls) if kls else None,
        entropy_last=entropies[-1] if entropies else None,
        game_seconds=game_seconds,
        timed_games=timed,
        won_within=won_within,
        goal_within=goal_within,
    )


def describe(r: LearnerScore) -> str:
    def f(x: float | None, spec: str = ".3f") -> str:
        return "-" if x is None else format(x, spec)

    by_bin = " / ".join(f"{start / 1e6:g}M {mean:.2f}" for start, mean, _ in r.bins)
    timed = (
        f"\n  of {r.timed_games:,} games with their length: won by a goal within {r.game_seconds:g} s "
        f"{f(r.won_within)}, any goal within {r.game_seconds:g} s {f(r.goal_within)}"
        if r.timed_games
        else ""
    )
    return (
        f"{r.run}: {r.steps:,} agent steps; learner vs {r.opponent} from {r.from_steps / 1e6:g}M: {f(r.score)} "
        f"+-{f(r.stderr)} ({r.games:,} games); goals per agent-minute {f(r.goals_per_minute)}; learning rate "
        f"{f(r.learning_rate_first, '.3g')} -> {f(r.learning_rate_last, '.3g')}; update KL median "
        f"{f(r.update_kl_median, '.2g')}, last entropy {f(r.entropy_last, '.2f')}\n  by bin: {by_bin or '-'}{timed}"
    )


def plot(results: list[LearnerScore], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in results:
        if r.bins:
            ax.plot([b[0] / 1e6 for b in r.bins], [b[1] for b in r.bins], marker="o", label=r.run)
    ax.set_xlabel("agent steps (millions)")
    ax.set_ylabel(f"learner's training score vs {results[0].opponent if results else '-'}")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("runs", nargs="+", help="run directories (each with games.csv and metrics.jsonl)")
    p.add_argument("--opponent", default="rule", help="the pool opponent (games.csv player_b; default rule)")
    p.add_argument("--from-steps", type=int, default=5_000_000, help="count games from this step (default 5M)")
    p.add_argument("--bin-steps", type=int, default=2_000_000, help="bin width in agent steps (default 2M)")
    p.add_argument("--game-seconds", type=float, default=60.0, help="the clock of the within shares (default 60)")
    p.add_argument("--json", help="write the readings to this JSON file")
    p.add_argument("--plot", help="write a PNG of the binned score against agent steps")
    args = p.parse_args(argv)
    if args.bin_steps < 1 or args.from_steps < 0 or not args.game_seconds > 0:
        p.error("--bin-steps must be at least 1, --from-steps at least 0 and --game-seconds above 0")
    try:
        results = [
            learner_score(Path(r), args.opponent, args.from_steps, args.bin_steps, args.game_seconds) for r in args.runs
        ]
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for r in results:
        print(describe(r))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=2))
    if args.plot:
        plot(results, Path(args.plot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
