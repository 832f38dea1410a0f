"""Which milestone should a run ship? Its last milestones against every opponent, and the pick rules beside them.

A run's shipped bot is one of its milestones (``best.json``). Milestones 1M agent steps apart can play very
differently as exported (the argmax of one set of weights), so part of what a shipped bot scores against the
opponents it never met may be the choice of the milestone rather than the run. This study measures that on one
finished run, paired by construction (same run, same games, only the pick differs):

1. its last ``--milestones`` K rated milestones of the last stage each play every opponent of
   ``benchmarks/skill_curve.py`` (rule, idle and the four eval-only styles of ``benchmarks/eval_opponents.py``),
   as exported and sampled, ``--games`` games of ``--game-seconds`` (``--eval-seed``): N4 (the mean of the eight
   never-met win rates) and S (the mean of the four rule / idle win rates) per milestone;
2. every pair of them plays ``--sibling-games`` games as exported (the sibling round robin);
3. ``speedflip pick`` over the same K on a copy of the run (``--pick-games`` against rule and idle);

and then reports which milestone each pick rule ships (none of them sees a never-met opponent) with its N4 and S:
``rating`` (the preset's: ``best.json``'s rule over the 8-game ratings), ``newest``, ``elo``, ``final_pick``,
``siblings`` (the best round-robin score) and ``anchors_100`` (the best S: the same games S is measured in), the
oracle (the best N4), and the Spearman correlation over the K between N4 and each rule's criterion.

    python benchmarks/pick_study.py RUN --out pick.json [--reuse SKILL_CURVE_OUT/skill_curve.json]

Every evaluation is written to ``--work`` and reused when the study is run again (an interrupted study goes on).
docs/learning.md (seventy-fourth session) has the measurements.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from speedflip.selfplay.best import BestMilestone

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from skill_curve import (  # noqa: E402
    DEFAULT_OPPONENTS,
    SCRIPTED,
    eval_modes,
    opponent_spec,
    rated_milestones,
    run_score,
    shipped_at,
    speedflip_cmd,
)

OPPONENTS = DEFAULT_OPPONENTS
NEVER_MET = tuple(o for o in DEFAULT_OPPONENTS if o in SCRIPTED)
MODES = tuple(eval_modes(also_stochastic=True))


def last_milestones(run_dir: Path, count: int) -> list[BestMilestone]:
    """The run's last ``count`` rated milestones of its last stage, oldest first."""
    rated = rated_milestones(run_dir)
    if not rated:
        raise SystemExit(f"{run_dir} has no rated milestone (games.csv): train with selfplay.rate_milestones=true")
    stage = rated[-1].stage
    return [m for m in rated if m.stage == stage][-count:]


def play(a: str, b: str, mode: str, games: int, seconds: float, seed: int, json_path: Path) -> dict[str, Any]:
    """``speedflip eval A B`` (A's side of the summary), reusing ``json_path`` when it is there."""
    if not json_path.is_file():
        json_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            *speedflip_cmd(),
            "eval",
            a,
            b,
            "--games",
            str(games),
            "--game-seconds",
            f"{seconds:g}",
            "--seed",
            str(seed),
            "--league",
            str(json_path.parent / "league.json"),
            "--json",
            str(json_path),
        ]
        if mode == "stochastic":
            cmd.append("--stochastic")
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "160"})
        if proc.returncode != 0:
            raise SystemExit(f"eval failed ({' '.join(cmd)}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    data: dict[str, Any] = json.loads(json_path.read_text())
    if data["games"] != games:
        raise SystemExit(f"{json_path} holds {data['games']} games, not {games}: delete it or use another --work")
    return data


def n4_and_s(results: dict[str, dict[str, dict[str, Any]]]) -> tuple[float, float]:
    """N4 = the mean of the eight never-met win rates, S = the mean of the four rule / idle win rates (the run
    score of ``skill_curve.py``)."""
    n4 = sum(results[o][m]["win_rate"] for o in NEVER_MET for m in MODES) / (len(NEVER_MET) * len(MODES))
    s = run_score(results)
    assert s is not None, "every opponent is played in both modes"
    return n4, s


def ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman's rank correlation (Pearson's of the ranks); None when either side is constant."""
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return None if sxx == 0 or syy == 0 else sxy / (sxx * syy) ** 0.5


def best_of(names: list[str], criterion: dict[str, float]) -> str:
    """The name with the highest criterion; a tie goes to the newer (later in ``names``)."""
    return max(reversed(names), key=lambda n: criterion[n])


def round_robin(
    milestones: list[BestMilestone], run_dir: Path, games: int, seconds: float, seed: int, work: Path
) -> dict[str, float]:
    """Every pair plays ``games`` games as exported: each milestone's score rate over all its games."""
    points = {m.name: 0.0 for m in milestones}
    played = {m.name: 0 for m in milestones}
    for i, a in enumerate(milestones):
        for b in milestones[i + 1 :]:
            data = play(
                str(a.folder(run_dir)),
                str(b.folder(run_dir)),
                "deterministic",
                games,
                seconds,
                seed,
                work / "siblings" / f"{a.step}-{b.step}.json",
            )
            points[a.name] += data["score_rate"] * games
            points[b.name] += (1.0 - data["score_rate"]) * games
            played[a.name] += games
            played[b.name] += games
    return {n: points[n] / played[n] for n in points} if len(milestones) > 1 else {n: 0.5 for n in points}


def final_pick_scores(run_dir: Path, count: int, games: int, work: Path) -> dict[str, float]:
    """``speedflip pick --milestones count`` on a copy of the run (the run's own best.json stays): each
    candidate's score rate against the rule bot and the idle car."""
    copy = work / "run-copy"
    result = copy / "final_pick.json"
    if not result.is_file():
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("checkpoints", "tb", "eval", "replays"))
        cmd = [*speedflip_cmd(), "pick", str(copy), "--milestones", str(count), "--games", str(games)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0 or not result.is_file():
            raise SystemExit(f"speedflip pick failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    data = json.loads(result.read_text())
    return {c["name"]: float(c["score"]) for c in data["candidates"]}


def reused_files(report_path: Path | None, milestone: BestMilestone) -> dict[tuple[str, str], Path]:
    """skill_curve's own evaluation files of ``milestone`` (``--reuse skill_curve.json``): of the shipped bot at
    the final snapshot when it is that milestone, or of the final snapshot's newest checkpoint when it is of the
    milestone's step (a milestone and a checkpoint of one step hold the same weights). (opponent, mode) -> the
    eval JSON; empty when skill_curve played neither."""
    if report_path is None:
        return {}
    report = json.loads(report_path.read_text())
    snap = report["seeds"][-1]["snapshots"][-1]
    shipped = snap.get("shipped") or {}
    if shipped.get("name") == milestone.name and snap.get("shipped_results"):
        results = snap["shipped_results"]
    elif snap.get("agent_steps") == milestone.step:
        results = snap.get("results")
    else:
        return {}
    return {
        (o, m): Path(r["json"]) for o, by_mode in (results or {}).items() for m, r in by_mode.items() if "json" in r
    }


def study(args: argparse.Namespace) -> dict[str, Any]:
    run_dir: Path = args.run
    work: Path = args.work or (args.out.parent / f"{args.out.stem}-work")
    rated = rated_milestones(run_dir)
    cands = last_milestones(run_dir, args.milestones)
    shipped = shipped_at(rated, run_dir, rated[-1].step)  # what best.json names at the end of the run
    assert shipped is not None
    names = [m.name for m in cands]
    t0 = time.time()
    per: dict[str, dict[str, Any]] = {}
    for m in cands:
        reuse = reused_files(args.reuse, m)
        results: dict[str, dict[str, Any]] = {}
        for opponent in OPPONENTS:
            results[opponent] = {}
            for mode in MODES:
                path = work / "evals" / f"{m.step}-{opponent}-{mode}.json"
                src = reuse.get((opponent, mode))
                if src is not None and not path.is_file():
                    path.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(src, path)
                data = play(
                    str(m.folder(run_dir)),
                    opponent_spec(opponent),
                    mode,
                    args.games,
                    args.game_seconds,
                    args.eval_seed,
                    path,
                )
                results[opponent][mode] = {
                    k: data[k] for k in ("wins", "draws", "losses", "win_rate", "score_rate", "goals_a", "goals_b")
                }
            print(f"{m.name}: {opponent} done ({time.time() - t0:.0f} s)", flush=True)
        n4, s = n4_and_s(results)
        per[m.name] = {
            "step": m.step,
            "elo": round(m.elo, 1),
            "rating_anchor_score": m.anchor_score,
            "results": results,
            "N4": round(n4, 4),
            "S": round(s, 4),
        }
    siblings = round_robin(cands, run_dir, args.sibling_games, args.game_seconds, args.eval_seed, work)
    finals = final_pick_scores(run_dir, len(cands), args.pick_games, work)
    for n in names:
        per[n]["siblings"] = round(siblings[n], 4)
        per[n]["final_pick_score"] = finals.get(n)
    criteria: dict[str, dict[str, float]] = {
        "elo": {n: per[n]["elo"] for n in names},
        "siblings": siblings,
        "final_pick": {n: finals.get(n, -1.0) for n in names},
        "anchors_100": {n: per[n]["S"] for n in names},
        "rating_anchor_score": {n: per[n]["rating_anchor_score"] or 0.0 for n in names},
        "step": {n: float(per[n]["step"]) for n in names},
    }
    picks = {
        "rating": shipped["name"] if shipped["name"] in per else None,
        "newest": names[-1],
        "elo": best_of(names, criteria["elo"]),
        "final_pick": best_of(names, criteria["final_pick"]),
        "siblings": best_of(names, criteria["siblings"]),
        "anchors_100": best_of(names, criteria["anchors_100"]),
        "oracle_N4": best_of(names, {n: per[n]["N4"] for n in names}),
    }
    n4s = [per[n]["N4"] for n in names]
    return {
        "benchmark": "pick_study",
        "run": str(run_dir),
        "command": [sys.executable, *sys.argv],
        "config": {
            "milestones": args.milestones,
            "games": args.games,
            "game_seconds": args.game_seconds,
            "eval_seed": args.eval_seed,
            "sibling_games": args.sibling_games,
            "pick_games": args.pick_games,
        },
        "shipped_by_rating": {
            "name": shipped["name"],
            "step": shipped["agent_steps"],
            "among_candidates": shipped["name"] in per,
        },
        "milestones": per,
        "picks": {
            rule: (None if n is None else {"name": n, "N4": per[n]["N4"], "S": per[n]["S"]})
            for rule, n in picks.items()
        },
        "N4_spread": round(max(n4s) - min(n4s), 4),
        "spearman_vs_N4": {c: spearman(list(v.values()), n4s) for c, v in criteria.items()},
        "spearman_vs_S": {c: spearman(list(v.values()), [per[n]["S"] for n in names]) for c, v in criteria.items()},
        "seconds": round(time.time() - t0, 1),
    }


def table(report: dict[str, Any]) -> str:
    lines = ["| milestone | Elo | rating score | N4 | S | siblings | final pick |", "|---|---|---|---|---|---|---|"]
    for name, m in report["milestones"].items():
        fp = m["final_pick_score"]
        rs = m["rating_anchor_score"]
        lines.append(
            f"| {name} | {m['elo']:.0f} | {'-' if rs is None else f'{rs:.3f}'} | {m['N4']:.4f} | "
            f"{m['S']:.4f} | {m['siblings']:.3f} | {'-' if fp is None else f'{fp:.3f}'} |"
        )
    lines.append("")
    for rule, p in report["picks"].items():
        lines.append(
            f"{rule}: "
            + ("(not among the candidates)" if p is None else f"{p['name']} N4 {p['N4']:.4f} S {p['S']:.4f}")
        )
    rho = {c: (None if r is None else round(r, 2)) for c, r in report["spearman_vs_N4"].items()}
    lines.append(f"N4 spread {report['N4_spread']:.4f}; Spearman vs N4 {rho}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path, help="a finished run directory with rated milestones")
    p.add_argument("--out", type=Path, required=True, help="the study's JSON")
    p.add_argument("--work", type=Path, help="where the evaluations are kept and reused (default: beside --out)")
    p.add_argument(
        "--reuse", type=Path, help="the run's skill_curve.json: its evaluations of the shipped and the newest milestone"
    )
    p.add_argument("--milestones", type=int, default=6, help="the last K rated milestones (default 6)")
    p.add_argument("--games", type=int, default=100, help="games per opponent and play mode (default 100)")
    p.add_argument("--game-seconds", type=float, default=60.0, help="simulated seconds per game (default 60)")
    p.add_argument("--eval-seed", type=int, default=0, help="the games' seed (default 0, as skill_curve)")
    p.add_argument("--sibling-games", type=int, default=20, help="games per pair of milestones (default 20)")
    p.add_argument("--pick-games", type=int, default=32, help="speedflip pick: games per anchor (default 32)")
    args = p.parse_args(argv)
    if args.milestones < 1:
        p.error(f"--milestones {args.milestones}: give 1 or more")
    for flag in ("games", "sibling_games", "pick_games"):
        if getattr(args, flag) < 2 or getattr(args, flag) % 2:
            p.error(f"--{flag.replace('_', '-')} {getattr(args, flag)}: give an even count >= 2 (sides are swapped)")
    if not (args.run / "games.csv").is_file():
        p.error(f"{args.run} is not a run directory with games.csv: give a finished run (e.g. /tmp/skill/X/seedS)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = study(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(table(report))
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
