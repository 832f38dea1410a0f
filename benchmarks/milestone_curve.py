"""Evaluate a finished run's milestones against the skill curve's opponents: skill by agent steps, no pick.

A lever compared on one shipped bot (the best-rated milestone) carries the pick's noise: neighbouring
milestones of one run differ by up to 0.3 in mean win rate (docs/learning.md, seventh session). This
script evaluates several milestones of each run, deterministic (as the exported bot plays; ``--stochastic``:
sampling its actions, as in training), against the rule bot, the idle car and the two evaluation-only bots of
``benchmarks/eval_opponents.py``, with the same ``speedflip eval`` call as ``skill_curve.py`` (fixed seed,
sides swapped, 60-second games). Chosen per run: every ``--every``-th milestone from ``--from-steps`` and the
last ``--last`` ones, all at or below ``--until-steps`` (so runs that trained further can be compared step for
step). Results already in the output JSON are kept and not played again; the summary per run is the mean win
rate of its last ``--last`` milestones over the opponents. ``--ensemble`` also plays ``RUN@lastN``, the last
``--last`` milestones as one bot (the mean of their action probabilities, ``EnsemblePolicy``), and the summary
sets it beside its members' mean.

    python benchmarks/milestone_curve.py RUN [RUN ...] --last 4 --games 40 --out milestones.json
    python benchmarks/milestone_curve.py RUN --until-steps 32100000 --last 4 --out milestones.json
    python benchmarks/milestone_curve.py RUN --every 1 --last 1 --opponents rule idle --stochastic --out sampled.json
    python benchmarks/milestone_curve.py RUN [RUN ...] --last 4 --games 100 --opponents rule idle --ensemble --out F
    python benchmarks/milestone_curve.py --summarize milestones.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from skill_curve import DEFAULT_OPPONENTS, opponent_spec, speedflip_cmd

from speedflip.checkpoint import list_checkpoints


def milestone_folders(run: Path, stage: str) -> list[Path]:
    """The run's milestone folders (named by their agent step) in step order."""
    stage_dir = run / "milestones" / stage
    if not stage_dir.is_dir():
        raise SystemExit(f"'{run}' has no milestones: {stage_dir}/ is missing (give a run directory)")
    return list_checkpoints(stage_dir)[::-1]  # milestones are checkpoint folders; oldest first


def choose(folders: list[Path], from_steps: int, until_steps: int | None, every: int, last: int) -> list[Path]:
    """Every ``every``-th folder from ``from_steps`` plus the last ``last``, none above ``until_steps``."""
    kept = [p for p in folders if until_steps is None or int(p.name) <= until_steps]
    strided = [p for p in kept if int(p.name) >= from_steps][::every] if every > 0 else []
    tail = kept[-last:] if last > 0 else []
    return sorted(set(strided) | set(tail), key=lambda p: int(p.name))


def eval_command(milestone: Path | str, opponent: str, games: int, seed: int, stochastic: bool, tmp: Path) -> list[str]:
    """The ``speedflip eval`` call of one milestone against ``opponent`` (its league and JSON in ``tmp``)."""
    return [
        *speedflip_cmd(), "eval", str(milestone), opponent_spec(opponent), "--games", str(games),
        "--game-seconds", "60", "--seed", str(seed), "--league", str(tmp / "league.json"),
        "--json", str(tmp / "eval.json"), *(["--stochastic"] if stochastic else []),
    ]  # fmt: skip


def action_mode(stochastic: bool) -> str:
    return "stochastic" if stochastic else "deterministic"


def resume_mismatch(report: dict[str, Any], opponents: list[str], games: int, stochastic: bool) -> str | None:
    """Why a written report cannot be continued with these settings (``None`` if it can). Reports written
    before the action mode was recorded were deterministic."""
    if report["opponents"] != opponents or report["games"] != games:
        return "other opponents or game counts"
    if report.get("action_mode", "deterministic") != action_mode(stochastic):
        return f"{report.get('action_mode', 'deterministic')} play, not {action_mode(stochastic)}"
    return None


def evaluate(milestone: Path | str, opponent: str, games: int, seed: int, stochastic: bool = False) -> dict[str, Any]:
    """One ``speedflip eval`` of a milestone against ``opponent``, deterministic unless ``stochastic``."""
    with tempfile.TemporaryDirectory() as tmp:
        json_path = Path(tmp) / "eval.json"
        cmd = eval_command(milestone, opponent, games, seed, stochastic, Path(tmp))
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "160"})
        if proc.returncode != 0:
            raise SystemExit(f"eval of {milestone} vs {opponent} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        data = json.loads(json_path.read_text())
    return {
        "games": data["games"], "wins": data["wins"], "draws": data["draws"], "losses": data["losses"],
        "win_rate": data["win_rate"], "goals_for": data["goals_a"], "goals_against": data["goals_b"],
        "own_goals_against": data.get("own_goals_a"), "eval_seconds": round(time.perf_counter() - start, 1),
    }  # fmt: skip


def summarize(report: dict[str, Any]) -> str:
    """Per run: each chosen milestone's wins per opponent and the mean of the last ``last`` milestones."""
    lines = []
    for run, entry in report["runs"].items():
        mode = report.get("action_mode", "deterministic")
        lines.append(f"{run}  ({mode}; last {entry['last']} up to {entry['until_steps'] or 'the end'})")
        means = []
        for step in sorted(entry["milestones"], key=int):
            row = entry["milestones"][step]
            rates = [row[o]["win_rate"] for o in report["opponents"] if o in row]
            mean = statistics.fmean(rates) if len(rates) == len(report["opponents"]) else float("nan")
            tail = step in entry["tail"]
            if tail:
                means.append(mean)
            cells = " ".join(f"{o} {row[o]['win_rate']:.2f}" for o in report["opponents"] if o in row)
            lines.append(f"  {int(step):>11,}{' *' if tail else '  '} {cells}  mean {mean:.3f}")
        value = statistics.fmean(means) if means else float("nan")
        lines.append(f"  mean of the last {len(means)} (*): {value:.3f}")
        ensemble = entry.get("ensemble", {})
        if len(ensemble) == len(report["opponents"]):
            rates = [ensemble[o]["win_rate"] for o in report["opponents"]]
            cells = " ".join(f"{o} {r:.2f}" for o, r in zip(report["opponents"], rates, strict=True))
            mean = statistics.fmean(rates)
            lines.append(f"  ensemble of the last {entry['last']}: {cells}  mean {mean:.3f} ({mean - value:+.3f})")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", type=Path, help="finished run directories (milestones/<stage>/)")
    parser.add_argument("--out", type=Path, help="the JSON to write (and to resume from)")
    parser.add_argument("--summarize", type=Path, metavar="JSON", help="print the summary of a written JSON")
    parser.add_argument("--stage", default="main")
    parser.add_argument("--from-steps", type=int, default=0, help="strided milestones from this agent step")
    parser.add_argument("--until-steps", type=int, default=None, help="no milestone above this agent step")
    parser.add_argument("--every", type=int, default=0, help="every k-th milestone from --from-steps (0: none)")
    parser.add_argument("--last", type=int, default=4, help="the last N milestones (the summary's mean)")
    parser.add_argument("--games", type=int, default=40)
    parser.add_argument("--eval-seed", type=int, default=0)
    parser.add_argument("--opponents", nargs="+", default=list(DEFAULT_OPPONENTS))
    parser.add_argument("--stochastic", action="store_true", help="sample the milestones' actions (default: argmax)")
    parser.add_argument(
        "--ensemble", action="store_true", help="also play RUN@lastN, the last --last milestones as one bot"
    )
    args = parser.parse_args()
    if args.summarize:
        print(summarize(json.loads(args.summarize.read_text())))
        return
    if not args.runs or args.out is None:
        parser.error("give run directories and --out JSON (or --summarize JSON)")
    report: dict[str, Any] = {"benchmark": "milestone_curve", "opponents": args.opponents, "games": args.games,
                              "eval_seed": args.eval_seed, "action_mode": action_mode(args.stochastic),
                              "command": sys.argv, "runs": {}}  # fmt: skip
    if args.out.is_file():
        report = json.loads(args.out.read_text())
        mismatch = resume_mismatch(report, args.opponents, args.games, args.stochastic)
        if mismatch:
            raise SystemExit(f"{args.out} holds {mismatch}; pick another --out")
    for run in args.runs:
        chosen = choose(milestone_folders(run, args.stage), args.from_steps, args.until_steps, args.every, args.last)
        key = f"{run.resolve()}@{args.until_steps or 'end'}"
        entry = report["runs"].setdefault(key, {"milestones": {}})
        entry.update(last=args.last, until_steps=args.until_steps, tail=[p.name for p in chosen[-args.last :]])
        for folder in chosen:
            row = entry["milestones"].setdefault(folder.name, {})
            for opponent in args.opponents:
                if opponent not in row:
                    row[opponent] = evaluate(folder, opponent, args.games, args.eval_seed, args.stochastic)
                    print(f"{run.name} {int(folder.name):,} vs {opponent}: {row[opponent]['wins']} / "
                          f"{row[opponent]['draws']} / {row[opponent]['losses']}", flush=True)  # fmt: skip
                    args.out.write_text(json.dumps(report, indent=1))
        if args.ensemble and args.until_steps is None:
            ensemble = entry.setdefault("ensemble", {})
            for opponent in args.opponents:
                if opponent not in ensemble:
                    ensemble[opponent] = evaluate(f"{run}@last{args.last}", opponent, args.games, args.eval_seed,
                                                  args.stochastic)  # fmt: skip
                    print(f"{run.name} @last{args.last} vs {opponent}: {ensemble[opponent]['wins']} / "
                          f"{ensemble[opponent]['draws']} / {ensemble[opponent]['losses']}", flush=True)  # fmt: skip
                    args.out.write_text(json.dumps(report, indent=1))
    print(summarize(report))


if __name__ == "__main__":
    main()
