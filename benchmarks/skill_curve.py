"""Skill per minute: how well a preset's bot plays after N minutes of wall clock, against opponents it never met.

For each seed, one at a time (the machine trains one run, as a user's would), this runs::

    speedflip train --preset P --run-dir OUT/seed<k> --new --set run.seed=<k> \\
        --set run.checkpoint_interval_steps=C --set run.total_steps=<huge> [--set ...]

as a subprocess and stops it with SIGINT at N minutes of wall clock (it saves a checkpoint and exits 0).
While it trains, every M minutes the newest checkpoint that verifies is copied to
``OUT/seed<k>/snapshots/<minute>min/`` (with its ``global_step`` and the wall minute it was written:
``--checkpoint-every`` keeps a fresh one near each mark); the checkpoint saved at the stop is the last
snapshot. The clock starts when the train command is launched, so start-up counts, as it does for a user.
``run.total_steps`` is set out of reach and ``run.time_budget_minutes`` to N (the clock ends the run), so
``ppo.anneal_lr`` follows the minutes; DQN's epsilon, a schedule over steps, would not progress: the JSON
carries a warning when the run's config has one.
``--steps S`` ends every run at S agent steps instead, with N minutes as a cap: a lever measured on a host
slower or faster than its baseline's is then compared at the baseline's steps (a thirty-fourth session method).

After the seed's training, every snapshot plays ``speedflip eval SNAPSHOT OPPONENT --json`` against
``rule`` (the bot training plays against), ``idle``, and the evaluation-only scripted bots of
``benchmarks/eval_opponents.py`` (``ball_chaser``, ``goalie``, ``bumper``, ``shadow``: never used in training),
with a fixed ``--eval-seed`` and sides swapped halfway (eval does both), 60-second games, ``--games`` games for the
earlier snapshots and ``--games-final`` for the last. Actions are deterministic (the most likely one,
as the exported bot plays); ``--also-stochastic`` also evaluates sampled play.

Output in ``--out``: ``skill_curve.json`` (written after every evaluation, so an interrupted run keeps
what it measured; the load average and the busiest processes at the start and end say what else ran),
``skill_curve.png`` (win rate against wall-clock minutes and against agent steps, one line per
seed x opponent), the train logs (``seed<k>.train.log``) and the eval JSONs (``seed<k>/eval/``).
``--summarize JSON`` prints the markdown tables, and per seed the last snapshot's shipped bot against the issue's
targets (won / drawn / lost, own goals, the run's score).

Usage::

    python benchmarks/skill_curve.py --preset 1v1 --minutes 30 --seeds 3 --out runs/skill-1v1
    python benchmarks/skill_curve.py --preset quick --minutes 1.5 --seeds 1 --snapshot-minutes 0.5 \\
        --games 4 --games-final 4 --checkpoint-every 50000 --out /tmp/skill-tiny      # a smoke test
    python benchmarks/skill_curve.py --preset 1v1 --steps 22437888 --minutes 50 --seeds 1 --first-seed 1 \\
        --snapshot-minutes 50 --set ... --out /tmp/skill/lever         # at a baseline's steps on another host
    python benchmarks/skill_curve.py --summarize runs/skill-1v1/skill_curve.json
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from speedflip.checkpoint import CheckpointError, list_checkpoints, verify_checkpoint
from speedflip.selfplay.best import BestMilestone, ShipBy, next_best
from speedflip.selfplay.league import FIXED_RATINGS

HERE = Path(__file__).resolve().parent
EVAL_OPPONENTS_FILE = HERE / "eval_opponents.py"
DEFAULT_OPPONENTS = ("rule", "idle", "ball_chaser", "goalie", "bumper", "shadow")
SCRIPTED = {"ball_chaser", "goalie", "bumper", "shadow"}  # functions of eval_opponents.py
NO_LIMIT_STEPS = 10**12  # the run is stopped by the clock, never by run.total_steps
STOP_GRACE_SECONDS = 600.0  # time allowed for the final save after SIGINT


def opponent_spec(name: str) -> str:
    if name in SCRIPTED:
        return f"py:{EVAL_OPPONENTS_FILE}:{name}"
    return name


def speedflip_cmd() -> list[str]:
    return [sys.executable, "-m", "speedflip.cli"]


def eval_modes(also_stochastic: bool) -> list[str]:
    """The play modes a skill curve evaluates: as exported (``deterministic``), and sampled when asked."""
    return ["deterministic", *(["stochastic"] if also_stochastic else [])]


def minute_label(minute: float) -> str:
    return f"{minute:g}min"


def cpu_model() -> str | None:
    """The CPU's model name (Linux), so runs on different hosts are not compared as if alike."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def machine_load() -> dict[str, Any]:
    """What else was running: the load averages and the busiest processes (ps, where available)."""
    info: dict[str, Any] = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "cpu_count": os.cpu_count()}
    try:
        info["loadavg_1_5_15"] = list(os.getloadavg())
    except OSError:
        info["loadavg_1_5_15"] = None
    try:
        out = subprocess.run(
            ["ps", "-eo", "pid,pcpu,pmem,etime,args", "--sort=-pcpu"], capture_output=True, text=True, timeout=10
        ).stdout
        info["top_processes"] = [line.strip()[:140] for line in out.splitlines()[:9]]
    except (OSError, subprocess.SubprocessError):
        info["top_processes"] = None
    return info


def print_load(label: str, load: dict[str, Any]) -> None:
    print(f"[{label}] load average (1/5/15 min): {load['loadavg_1_5_15']} on {load['cpu_count']} CPUs", flush=True)
    for line in load.get("top_processes") or []:
        print(f"    {line}", flush=True)


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True, text=True, timeout=10, check=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=HERE, capture_output=True, text=True
        ).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


# --- training with snapshots -------------------------------------------------------------------------------


def take_snapshot(run_dir: Path, dest: Path, train_start: float) -> dict[str, Any] | None:
    """Copy the newest checkpoint that verifies (before and after the copy: rotation may delete it
    meanwhile) to ``dest``; None when there is none yet."""
    for ckpt in list_checkpoints(run_dir / "checkpoints"):
        try:
            meta = verify_checkpoint(ckpt)
            written = (ckpt / "meta.json").stat().st_mtime
            tmp = dest.with_name(f".tmp-{dest.name}")
            tmp.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(ckpt, tmp)
            verify_checkpoint(tmp)
        except (CheckpointError, OSError):
            continue  # damaged, or rotated away while copying: the next newest
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
        return {
            "path": str(dest),
            "source": str(ckpt),
            "agent_steps": int(meta["global_step"]),
            "checkpoint_wall_minutes": round((written - train_start) / 60.0, 3),
        }
    return None


def train_seed(args: argparse.Namespace, seed: int, out: Path) -> dict[str, Any]:
    """Train one seed for ``args.minutes`` of wall clock, snapshotting every ``args.snapshot_minutes``."""
    run_dir = out / f"seed{seed}"
    if run_dir.exists():  # an earlier measurement: kept, renamed aside (before train starts, so no snapshot can
        # come from its checkpoints)
        aside = run_dir.with_name(f"{run_dir.name}.old-{time.strftime('%Y%m%d-%H%M%S')}")
        run_dir.rename(aside)
        print(f"seed {seed}: the earlier {run_dir} is now {aside}", flush=True)
    snap_dir = run_dir / "snapshots"
    log_path = out / f"seed{seed}.train.log"
    sets = train_settings(args, seed)
    cmd = [*speedflip_cmd(), "train", "--preset", args.preset, "--run-dir", str(run_dir), "--new"]
    for s in sets:
        cmd += ["--set", s]
    marks = []
    m = args.snapshot_minutes
    while m < args.minutes - 1e-9:
        marks.append(round(m, 6))
        m += args.snapshot_minutes
    print(f"seed {seed}: {' '.join(cmd)}  (log: {log_path})", flush=True)
    load_before = machine_load()
    snapshots: list[dict[str, Any]] = []
    interrupted = False
    with log_path.open("w") as log:
        start = time.time()
        # a session of its own: a Ctrl-C here reaches only this script, which passes one SIGINT on
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            for mark in marks:
                while proc.poll() is None and time.time() - start < mark * 60.0:
                    time.sleep(0.5)
                if proc.poll() is not None:
                    break
                snapshots.append(snapshot_record(run_dir, snap_dir, seed, mark, start, snapshots))
            while proc.poll() is None and time.time() - start < args.minutes * 60.0:
                time.sleep(0.5)
        except KeyboardInterrupt:
            interrupted = True
            print("interrupted: stopping the training run (it saves a checkpoint)", flush=True)
        stopped_at = time.time() - start
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        exited_at = time.time() - start
    returncode = proc.returncode
    warnings = schedule_warnings(run_dir)
    for w in warnings:
        print(f"seed {seed}: warning: {w}", flush=True)
    final_minute = (
        round(stopped_at / 60.0, 3) if (interrupted or stopped_at < args.minutes * 60.0 - 1) else args.minutes
    )
    final = snapshot_record(run_dir, snap_dir, seed, final_minute, start, snapshots)
    final["final"] = True
    snapshots.append(final)
    load_after = machine_load()
    note = "" if returncode == 0 else f" (exit code {returncode}: see {log_path})"
    print(
        f"seed {seed}: stopped at {stopped_at / 60:.2f} min, exited at {exited_at / 60:.2f} min{note}; "
        f"{len(snapshots)} snapshots",
        flush=True,
    )
    return {
        "seed": seed,
        "run_dir": str(run_dir),
        "command": cmd,
        "train_log": str(log_path),
        "returncode": returncode,
        "warnings": warnings,
        "interrupted": interrupted,
        "stopped_at_minutes": round(stopped_at / 60.0, 3),
        "exited_at_minutes": round(exited_at / 60.0, 3),
        "load_before": load_before,
        "load_after": load_after,
        "snapshots": snapshots,
    }


def run_config(run_dir: Path) -> dict[str, Any]:
    """The run's resolved ``config.yaml`` (``{}`` when it is missing or unreadable)."""
    try:
        cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    except (OSError, ValueError, yaml.YAMLError):  # ValueError: not UTF-8
        return {}
    return cfg if isinstance(cfg, dict) else {}


def train_settings(args: argparse.Namespace, seed: int) -> list[str]:
    """The ``--set`` values of one seed's train command. By default the clock ends the run: ``run.total_steps`` out
    of reach and ``run.time_budget_minutes`` = ``--minutes``. With ``--steps N`` the run ends at N agent steps
    (``--minutes`` stays as a cap), so two levers are compared at the same steps on hosts of different speed;
    ``ppo.anneal_lr`` then follows the steps while they come before the cap."""
    return [
        f"run.seed={seed}",
        f"run.checkpoint_interval_steps={args.checkpoint_every}",
        f"run.total_steps={NO_LIMIT_STEPS if args.steps is None else args.steps}",
        # the run's own clock ends it too (as `speedflip train --minutes` does for a user), so schedules over the
        # run's length (ppo.anneal_lr) follow the minutes; the SIGINT below still stops it at the same mark
        f"run.time_budget_minutes={args.minutes!r}",
        *args.set,  # the user's settings come last and win
    ]


def schedule_warnings(run_dir: Path) -> list[str]:
    """Schedules tied to ``run.total_steps`` never progress when the clock, not the budget, ends the run (they
    follow ``run.time_budget_minutes`` when the run has one, as this script sets)."""
    cfg = run_config(run_dir)
    if not cfg:
        return []
    out = []
    timed = (cfg.get("run") or {}).get("time_budget_minutes") is not None
    if (cfg.get("ppo") or {}).get("anneal_lr") and not timed:
        out.append("ppo.anneal_lr decays over run.total_steps, which this run set very high: the rate barely decayed")
    if cfg.get("algo") == "dqn":
        out.append("DQN's epsilon decays over run.total_steps, which this run set very high: exploration stayed high")
    return out


def snapshot_record(
    run_dir: Path, snap_dir: Path, seed: int, minute: float, start: float, earlier: list[dict[str, Any]]
) -> dict[str, Any]:
    record: dict[str, Any] = {"seed": seed, "minute": minute, "taken_at_minutes": round((time.time() - start) / 60, 3)}
    found = take_snapshot(run_dir, snap_dir / minute_label(minute), start)
    if found is None:
        record.update(path=None, agent_steps=None, note="no checkpoint yet")
        print(f"  {minute_label(minute)}: no checkpoint yet", flush=True)
        return record
    record.update(found)
    same = [e for e in earlier if e.get("agent_steps") == found["agent_steps"]]
    if same:
        record["same_checkpoint_as_minute"] = same[-1]["minute"]
    print(
        f"  {minute_label(minute)}: checkpoint at {found['agent_steps']:,} agent steps "
        f"(written at {found['checkpoint_wall_minutes']:.2f} min)",
        flush=True,
    )
    return record


# --- evaluation --------------------------------------------------------------------------------------------


def evaluate(
    snapshot: dict[str, Any],
    opponent: str,
    mode: str,
    games: int,
    args: argparse.Namespace,
    out: Path,
    shipped: bool = False,
) -> dict[str, Any]:
    """``speedflip eval`` of the snapshot (its newest checkpoint), or with ``shipped`` of the run's best-rated
    milestone at that time, against ``opponent``."""
    seed, label = snapshot["seed"], minute_label(snapshot["minute"])
    eval_dir = out / f"seed{seed}" / "eval"
    eval_dir.mkdir(parents=True, exist_ok=True)
    json_path = eval_dir / f"{'shipped-' if shipped else ''}{label}-{opponent}-{mode}.json"
    path = snapshot["shipped"]["path"] if shipped else snapshot["path"]
    cmd = [
        *speedflip_cmd(), "eval", path, opponent_spec(opponent),
        "--games", str(games), "--game-seconds", f"{args.game_seconds:g}", "--seed", str(args.eval_seed),
        "--league", str(eval_dir / "league.json"), "--json", str(json_path),
    ]  # fmt: skip
    if mode == "stochastic":
        cmd.append("--stochastic")
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "160"})
    seconds = time.time() - t0
    if proc.returncode != 0:
        print(proc.stdout[-2000:] + proc.stderr[-2000:], file=sys.stderr)
        return {"error": f"eval exited {proc.returncode}", "command": cmd}
    data = json.loads(json_path.read_text())
    if data.get("action_mode") not in (None, mode):
        raise RuntimeError(f"asked for {mode} play, eval reports {data.get('action_mode')}")
    return eval_record(data, mode, seconds, json_path)


def eval_record(data: dict[str, Any], mode: str, seconds: float, json_path: Path) -> dict[str, Any]:
    """One evaluation's entry in the report, from ``speedflip eval --json``'s match summary (player a = the bot).

    Besides the results, both sides' shots and touches and the opponent's own goals: a bot that wins on the
    opponent's own goals without shooting (as most shipped bots do against ``ball_chaser``, docs/learning.md,
    seventy-second session) is told apart from one that attacks."""
    return {
        "games": data["games"],
        "wins": data["wins"],
        "draws": data["draws"],
        "losses": data["losses"],
        "win_rate": data["win_rate"],
        "score_rate": data["score_rate"],
        "score_rate_95ci": [data["interval_low"], data["interval_high"]],
        "goals_for": data["goals_a"],
        "goals_against": data["goals_b"],
        "own_goals_against": data.get("own_goals_a"),  # of goals_against: off the bot's own last touch
        "opponent_own_goals": data.get("own_goals_b"),  # of goals_for: off the opponent's own last touch
        "shots_for": data.get("shots_a"),
        "shots_against": data.get("shots_b"),
        "touches_for": data.get("touches_a"),
        "touches_against": data.get("touches_b"),
        "distinct_games": data.get("distinct_games"),  # games with different records (deterministic play repeats)
        "action_mode": data.get("action_mode", mode),
        "eval_seconds": round(seconds, 1),
        "json": str(json_path),
    }


def evaluate_snapshot(
    snap: dict[str, Any], games: int, args: argparse.Namespace, out: Path, save: Any, shipped: bool = False
) -> dict[str, dict[str, Any]]:
    """Every opponent x play mode for one snapshot: its newest checkpoint, or with ``shipped`` the best-rated
    milestone it names (``snap["shipped"]``). Saves after each evaluation, so an interrupted run keeps them."""
    modes = eval_modes(args.also_stochastic)
    key = "shipped_results" if shipped else "results"
    if shipped:
        bot = f"shipped {snap['shipped']['name']} ({snap['shipped']['elo']:.0f} Elo)"
    else:
        bot = f"({snap['agent_steps']:,} steps)"
    snap[key] = {}
    for opponent in args.opponents:
        snap[key][opponent] = {}
        for mode in modes:
            r = evaluate(snap, opponent, mode, games, args, out, shipped=shipped)
            snap[key][opponent][mode] = r
            where = f"  seed {snap['seed']} {minute_label(snap['minute'])} {bot} vs {opponent} ({mode})"
            if "error" in r:
                print(f"{where}: {r['error']}", flush=True)
            else:
                print(
                    f"{where}: {r['wins']}/{r['draws']}/{r['losses']} win {r['win_rate']:.2f} "
                    f"score {r['score_rate']:.2f} goals {r['goals_for']}-{r['goals_against']}"
                    + (f" (own goals {r['own_goals_against']})" if r.get("own_goals_against") is not None else ""),
                    flush=True,
                )
            save()
    return snap[key]


def evaluate_seed(
    result: dict[str, Any], args: argparse.Namespace, out: Path, save: Any, bots: tuple[bool, ...] = (False, True)
) -> None:
    """Evaluate every snapshot of one seed: its newest checkpoint (``False`` in ``bots``) and the bot a user
    would ship then (``True``: the best-rated milestone so far; ``--shipped`` asks for it alone, for runs
    measured before it existed). A policy evaluated before at the same game count reuses its results: a
    milestone and a checkpoint of the same agent step hold the same weights (the final snapshot is often the
    shipped bot), so they are played once."""
    run_dir = Path(result["run_dir"])
    rated = rated_milestones(run_dir)
    done: dict[tuple[int, int], dict[str, Any]] = {}  # (agent steps, games) -> results
    for snap in result["snapshots"]:
        if snap.get("path") is None:
            continue
        games = args.games_final if snap.get("final") else args.games
        snap["shipped"] = shipped_at(rated, run_dir, snap["agent_steps"])
        for shipped in bots:
            if shipped and snap["shipped"] is None:
                continue
            steps = snap["shipped"]["agent_steps"] if shipped else snap["agent_steps"]
            key = (steps, games)
            if key in done:
                snap["shipped_results" if shipped else "results"] = done[key]
                continue
            results = evaluate_snapshot(snap, games, args, out, save, shipped=shipped)
            if all("error" not in by_mode[m] for by_mode in results.values() for m in by_mode):
                done[key] = results
    if result["snapshots"]:
        check_best_file(run_dir, result["snapshots"][-1])


def rated_milestones(run_dir: Path) -> list[BestMilestone]:
    """Every rated milestone of a run, by step, read from ``games.csv``: each rating game's row carries the
    milestone's rating so far and its score (only its rating games are played at its own step), so the last
    row holds its Elo and the rows against the rule bot and the idle car its anchor score. Empty when the
    run rated nothing."""
    games = run_dir / "games.csv"
    if not games.is_file():
        return []
    rated: dict[str, dict[str, Any]] = {}
    with games.open(newline="") as f:
        for row in csv.DictReader(f):
            name, step = row["player_a"], row["step"]
            if "@" in name and step and name.endswith(f"@{step}"):
                entry = rated.setdefault(name, {"step": int(step), "points": 0.0, "games": 0})
                entry["elo"] = float(row["rating_a"])  # the last row: the rating after all its games
                if row["player_b"] in FIXED_RATINGS and row.get("score_a"):  # the rule bot and the idle car
                    entry["points"] += float(row["score_a"])
                    entry["games"] += 1
    milestones = []
    for name, e in rated.items():
        stage = name.rsplit("@", 1)[0]
        anchor_score = e["points"] / e["games"] if e["games"] else None
        milestones.append(BestMilestone(f"milestones/{stage}/{e['step']}", name, e["step"], e["elo"], stage,
                                        anchor_score=anchor_score))  # fmt: skip
    return sorted(milestones, key=lambda m: m.step)


def run_ship_rule(run_dir: Path) -> tuple[ShipBy, float]:
    """The run's ``selfplay.ship_by`` and ``selfplay.ship_margin`` from its ``config.yaml`` (``elo`` and 0 for
    runs made before each setting)."""
    selfplay = run_config(run_dir).get("selfplay") or {}
    ship_by: ShipBy = "anchor_score" if selfplay.get("ship_by", "elo") == "anchor_score" else "elo"
    return ship_by, float(selfplay.get("ship_margin", 0.0))


def shipped_at(rated: list[BestMilestone], run_dir: Path, agent_steps: int) -> dict[str, Any] | None:
    """The milestone the run shipped among those of step <= ``agent_steps``: what ``RUN/best.json`` named
    then (:func:`speedflip.selfplay.best.update_best` by the run's ``selfplay.ship_by`` and ``ship_margin``;
    a new stage replaces the best), from :func:`rated_milestones`, so runs made before ``best.json`` existed
    are scored the same way."""
    ship_by, margin = run_ship_rule(run_dir)
    best: BestMilestone | None = None
    for milestone in rated:
        if milestone.step > agent_steps:
            break
        best = next_best(best, milestone, ship_by, margin) or best
    if best is None:
        return None
    return {"name": best.name, "stage": best.stage, "agent_steps": best.step, "elo": round(best.elo, 1),
            "anchor_score": best.anchor_score, "path": str(run_dir / best.path)}  # fmt: skip


def check_best_file(run_dir: Path, final: dict[str, Any]) -> None:
    """Say when the run's ``best.json`` names another milestone than the rebuilt final choice."""
    best_file = run_dir / "best.json"
    if best_file.is_file() and final.get("shipped"):
        named = json.loads(best_file.read_text()).get("name")
        if named != final["shipped"]["name"]:  # the run went on after the final snapshot, or the rule changed
            print(f"  note: {best_file} names {named}, the rebuilt final choice is {final['shipped']['name']}")


# --- plot and table ----------------------------------------------------------------------------------------


def all_snapshots(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for seed in report["seeds"] for s in seed["snapshots"] if s.get("results")]


def write_plot(report: dict[str, Any], path: Path, mode: str = "deterministic") -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return False
    snaps = all_snapshots(report)
    opponents = report["config"]["opponents"]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = ["-", "--", ":", "-."]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    for s_i, seed in enumerate(sorted({s["seed"] for s in snaps})):
        mine = sorted((s for s in snaps if s["seed"] == seed), key=lambda s: s["minute"])
        for o_i, opp in enumerate(opponents):
            pts = [
                (s["checkpoint_wall_minutes"], s["agent_steps"], s["results"][opp][mode]["win_rate"])
                for s in mine
                if "win_rate" in s["results"].get(opp, {}).get(mode, {})
            ]
            if not pts:
                continue
            minutes, steps, rates = zip(*pts, strict=True)
            kw = {"color": colors[o_i % len(colors)], "linestyle": styles[s_i % len(styles)], "marker": "o"}
            axes[0].plot(minutes, rates, label=f"seed {seed} vs {opp}", **kw)
            axes[1].plot(steps, rates, label=f"seed {seed} vs {opp}", **kw)
    cfg = report["config"]
    axes[0].set_xlabel("wall-clock minutes of training (when the checkpoint was written)")
    axes[1].set_xlabel("agent steps")
    axes[0].set_ylabel(f"win rate ({mode}, {cfg['game_seconds']:g} s games)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.set_ylim(-0.02, 1.02)
    axes[1].legend(loc="best", fontsize="small")
    fig.suptitle(
        f"skill per minute: preset {cfg['preset']}, {report['machine']['cpu_count']} CPUs, load average (1/5/15 min) "
        f"at start {_load_text(report.get('load_start'))}, at end {_load_text(report.get('load_end'))}",
        fontsize="medium",
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _load_text(load: dict[str, Any] | None) -> str:
    values = (load or {}).get("loadavg_1_5_15")
    return "/".join(f"{v:.2f}" for v in values) if values else "unknown"


def _fmt(r: dict[str, Any] | None) -> str:
    if not r or "win_rate" not in r:
        return "-"
    own = r.get("own_goals_against")
    return f"{r['win_rate']:.2f} / {r['score_rate']:.2f}" + (f" (og {own})" if own else "")


def summary_table(report: dict[str, Any], mode: str = "deterministic", shipped: bool = False) -> str:
    """The markdown table: per seed and snapshot, and the median per minute. ``shipped``: the best-rated
    milestone at each snapshot (the bot ``speedflip eval/export RUN`` use) instead of the newest checkpoint."""
    opponents = report["config"]["opponents"]
    key = "shipped_results" if shipped else "results"
    snaps = [{**s, "results": s[key]} for s in all_snapshots(report) if any(mode in v for v in s.get(key, {}).values())]
    if not snaps:
        return f"(no {mode} results{' of the shipped bot' if shipped else ''})"
    head = "| seed | minute | agent steps | " + " | ".join(f"vs {o}: win / score" for o in opponents) + " |"
    lines = [head, "|" + "---|" * (3 + len(opponents))]
    for s in sorted(snaps, key=lambda s: (s["seed"], s["minute"])):
        cells = [_fmt(s["results"].get(o, {}).get(mode)) for o in opponents]
        steps = f"{s['agent_steps']:,}"
        if shipped:
            steps = f"{s['shipped']['name']} ({s['shipped']['elo']:.0f} Elo) of {steps}"
        lines.append(f"| {s['seed']} | {s['minute']:g} | {steps} | " + " | ".join(cells) + " |")
    seeds = sorted({s["seed"] for s in snaps})
    for minute in sorted({s["minute"] for s in snaps}):
        group = [s for s in snaps if s["minute"] == minute]
        cells = []
        for o in opponents:
            rs = [s["results"].get(o, {}).get(mode, {}) for s in group]
            rs = [r for r in rs if "win_rate" in r]
            if rs:
                w = statistics.median(r["win_rate"] for r in rs)
                sc = statistics.median(r["score_rate"] for r in rs)
                cells.append(f"{w:.2f} / {sc:.2f}")
            else:
                cells.append("-")
        steps = statistics.median(s["agent_steps"] for s in group)
        lines.append(f"| median of {len(group)}/{len(seeds)} | {minute:g} | {steps:,.0f} | " + " | ".join(cells) + " |")
    cfg = report["config"]
    games = f"{cfg['games']} games ({cfg['games_final']} for the last snapshot)"
    load_s = _load_text(report.get("load_start"))
    load_e = _load_text(report.get("load_end"))
    bot = "the best-rated milestone so far (shipped)" if shipped else "the newest checkpoint"
    foot = (
        f"\npreset `{cfg['preset']}`, {bot}, {mode} play, {games} of {cfg['game_seconds']:g} s, eval seed "
        f"{cfg['eval_seed']}, sides swapped; win / score rate (a draw scores 0.5), og: own goals conceded; "
        f"{report['machine']['cpu_count']} CPUs, load average (1/5/15 min) at start {load_s}, at end {load_e}."
    )
    return "\n".join(lines) + foot


TARGET_WINS_VS_RULE = 0.70  # issue "Skill per minute": win rate against the rule bot, as exported and sampled
TARGET_WINS_VS_IDLE = 0.95  # ... against an idle car, with no own goal


def _games(r: dict[str, Any] | None) -> str:
    if not r or "wins" not in r:
        return "-"
    return (
        f"{r['wins']} / {r['draws']} / {r['losses']} "
        f"({r['goals_for']}:{r['goals_against']}, {r.get('own_goals_against', 0)})"
    )


def bot_results(snapshot: dict[str, Any]) -> dict[str, Any]:
    """A snapshot's shipped bot's results: the best-rated milestone's, or the newest checkpoint's when that is the
    shipped bot (no separate ``shipped_results``); empty when none were played."""
    return snapshot.get("shipped_results") or snapshot.get("results") or {}


def run_score(results: dict[str, Any]) -> float | None:
    """The mean of the four win rates against the rule bot and the idle car, as exported and sampled (None
    when one of them was not played): one number per run, the one the learning sessions compare runs by."""
    rates = [results.get(o, {}).get(m, {}).get("win_rate") for o in ("rule", "idle") for m in eval_modes(True)]
    return None if any(r is None for r in rates) else sum(rates) / 4


def target_clauses(results: dict[str, Any]) -> dict[str, bool | None]:
    """Which of the issue's per-run clauses a bot's final results meet (None: not played): >= 0.70 wins against
    the rule bot and >= 0.95 against the idle car with no own goal, each as exported and sampled."""
    out: dict[str, bool | None] = {}
    for mode, label in (("deterministic", "exported"), ("stochastic", "sampled")):
        rule = results.get("rule", {}).get(mode)
        idle = results.get("idle", {}).get(mode)
        out[f"rule {label}"] = None if not rule else rule["win_rate"] >= TARGET_WINS_VS_RULE
        out[f"idle {label}"] = None if not idle else idle["win_rate"] >= TARGET_WINS_VS_IDLE
        out[f"no own goal vs idle {label}"] = None if not idle else idle.get("own_goals_against", 0) == 0
    return out


def target_table(report: dict[str, Any]) -> str:
    """Per seed, the shipped bot at the last snapshot: won / drawn / lost (goals for:against, own goals
    conceded) per opponent and mode, the run's score (``run_score``) and the clauses it meets."""
    opponents = report["config"]["opponents"]
    modes = eval_modes(report["config"].get("also_stochastic", False))
    head = (
        "| seed | agent steps | bot | play | " + " | ".join(f"vs {o}" for o in opponents) + " | score | clauses met |"
    )
    lines = [head, "|" + "---|" * (6 + len(opponents))]
    for seed in report["seeds"]:
        snaps = seed.get("snapshots") or []
        if not snaps:
            continue
        last = max(snaps, key=lambda s: s["minute"])
        results = bot_results(last)
        bot = last["shipped"]["name"] if last.get("shipped") and last.get("shipped_results") else "newest"
        score = run_score(results)
        clauses = target_clauses(results)
        met = sum(1 for v in clauses.values() if v)
        played = sum(1 for v in clauses.values() if v is not None)
        for i, mode in enumerate(modes):
            cells = [_games(results.get(o, {}).get(mode)) for o in opponents]
            tail = (f"{score:.4f}" if score is not None else "-", f"{met} of {played}") if i == 0 else ("", "")
            lines.append(
                f"| {seed['seed'] if i == 0 else ''} | {last['agent_steps']:,} | {bot} | "
                f"{'exported' if mode == 'deterministic' else 'sampled'} | "
                + " | ".join(cells)
                + f" | {tail[0]} | {tail[1]} |"
            )
    foot = (
        "\nthe last snapshot's bot: won / drawn / lost (goals for:against, own goals conceded); score: the mean of the "
        f"win rates against rule and idle, exported and sampled; clauses: >= {TARGET_WINS_VS_RULE:.2f} wins vs rule, "
        f">= {TARGET_WINS_VS_IDLE:.2f} vs idle, no own goal vs idle, each as exported and sampled "
        "(the issue's targets, per run)."
    )
    return "\n".join(lines) + foot


# --- main --------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--summarize", metavar="JSON", help="print the markdown table of a skill_curve.json and exit")
    p.add_argument("--shipped", metavar="JSON",
                   help="evaluate, for every snapshot of a finished skill_curve.json, the run's best-rated "
                   "milestone at that time (the bot speedflip eval/export use), with the JSON's eval settings; "
                   "adds it there")  # fmt: skip
    p.add_argument("--preset", default="1v1", help="the preset trained (default 1v1)")
    p.add_argument("--minutes", type=float, default=30.0, help="wall-clock minutes of training per seed (default 30)")
    p.add_argument("--steps", type=int,
                   help="end each run at this many agent steps instead (--minutes is then a cap): levers compared at "
                   "equal steps when the host's speed differs between their runs")  # fmt: skip
    p.add_argument("--seeds", type=int, default=3, help="how many seeds, trained one after another (default 3)")
    p.add_argument("--first-seed", type=int, default=0,
                   help="seeds run from this one: S..S+K-1 (default 0), to add seeds to a study later")  # fmt: skip
    p.add_argument("--snapshot-minutes", type=float, default=5.0, help="a snapshot every M minutes (default 5)")
    p.add_argument("--checkpoint-every", type=int, default=250_000,
                   help="run.checkpoint_interval_steps (default 250000)")  # fmt: skip
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed to train (repeatable)")
    p.add_argument("--out", help="output folder (default runs/skill-curve-<preset>)")
    p.add_argument("--games", type=int, default=40, help="eval games per opponent, earlier snapshots (default 40)")
    p.add_argument("--games-final", type=int, default=100, help="eval games per opponent, last snapshot (default 100)")
    p.add_argument("--game-seconds", type=float, default=60.0, help="simulated seconds per eval game (default 60)")
    p.add_argument("--eval-seed", type=int, default=0, help="eval --seed, the same for every snapshot (default 0)")
    p.add_argument("--opponents", default=",".join(DEFAULT_OPPONENTS),
                   help="comma-separated: rule, idle, random, ball_chaser, goalie, bumper, shadow "
                   "(default: all but random)")  # fmt: skip
    p.add_argument("--also-stochastic", action="store_true", help="also evaluate sampled play (--stochastic)")
    args = p.parse_args(argv)
    args.opponents = [o.strip() for o in args.opponents.split(",") if o.strip()]
    if args.summarize is None and args.shipped is None:
        if args.minutes <= 0 or args.snapshot_minutes <= 0:
            p.error("--minutes and --snapshot-minutes must be positive")
        if args.steps is not None and args.steps < 1:
            p.error("--steps must be at least 1")
        if args.seeds < 1 or args.first_seed < 0 or args.games < 2 or args.games_final < 2:
            p.error("--seeds must be at least 1, --first-seed at least 0, and --games/--games-final at least 2")
        unknown = [o for o in args.opponents if o not in (*SCRIPTED, "rule", "idle", "random")]
        if unknown:
            p.error(f"unknown opponents: {unknown}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.shipped:
        json_path = Path(args.shipped)
        saved = json.loads(json_path.read_text())
        cfg = saved["config"]
        args.opponents, args.games, args.games_final = cfg["opponents"], cfg["games"], cfg["games_final"]
        args.game_seconds, args.eval_seed, args.also_stochastic = (
            cfg["game_seconds"],
            cfg["eval_seed"],
            cfg["also_stochastic"],
        )
        saved.setdefault("shipped_load_start", machine_load())
        for result in saved["seeds"]:
            evaluate_seed(
                result, args, json_path.parent, lambda: json_path.write_text(json.dumps(saved, indent=2)), bots=(True,)
            )
        json_path.write_text(json.dumps(saved, indent=2))
        args.summarize = str(json_path)
    if args.summarize:
        saved = json.loads(Path(args.summarize).read_text())
        for shipped in (False, True):
            for mode in eval_modes(saved["config"].get("also_stochastic", False)):
                print(summary_table(saved, mode, shipped=shipped))
                print()
        print(target_table(saved))
        return 0
    out = Path(args.out or f"runs/skill-curve-{args.preset}")
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / "skill_curve.json"
    load_start = machine_load()
    print_load("start", load_start)
    report: dict[str, Any] = {
        "benchmark": "skill_curve",
        "command": [sys.executable, *sys.argv],
        "git_commit": git_commit(),
        "machine": {
            "cpu_count": os.cpu_count(),
            "cpu_model": cpu_model(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "config": {
            "preset": args.preset,
            "minutes": args.minutes,
            "steps": args.steps,
            "seeds": list(range(args.first_seed, args.first_seed + args.seeds)),
            "snapshot_minutes": args.snapshot_minutes,
            "checkpoint_every": args.checkpoint_every,
            "set": args.set,
            "opponents": args.opponents,
            "eval_only_opponents": [o for o in args.opponents if o in SCRIPTED],
            "games": args.games,
            "games_final": args.games_final,
            "game_seconds": args.game_seconds,
            "eval_seed": args.eval_seed,
            "also_stochastic": args.also_stochastic,
        },
        "load_start": load_start,
        "load_end": None,
        "seeds": [],
    }

    def save() -> None:
        json_path.write_text(json.dumps(report, indent=2))

    save()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        result = train_seed(args, seed, out)
        report["seeds"].append(result)
        save()
        if result["interrupted"]:
            print("interrupted: the snapshots taken so far are not evaluated", flush=True)
            break
        evaluate_seed(result, args, out, save)
        save()
    report["load_end"] = machine_load()
    print_load("end", report["load_end"])
    save()
    png = out / "skill_curve.png"
    if write_plot(report, png):
        print(f"plot: {png}")
    print(f"results: {json_path}\n")
    for shipped in (False, True):
        for mode in eval_modes(args.also_stochastic):
            print(summary_table(report, mode, shipped=shipped))
            print()
    print(target_table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
