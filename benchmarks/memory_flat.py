"""Memory flatness of a long ``speedflip train`` run: does the resident memory stay flat?

Starts ``speedflip train`` (the ``1v1`` preset by default: 64 arenas, 256x256x256, worker processes
if the collector picks them) in a fresh run directory, samples the resident memory of the trainer
and all its child processes every ``--interval`` seconds for ``--minutes`` minutes, then stops it
(SIGINT, so it saves a checkpoint and exits as a user's Ctrl-C would) and reports:

- the mean total RSS (trainer + children) over the first and the last ``--window`` minutes,
- the least-squares slope of the total RSS in MB/hour, over the whole run and after the first
  ``--window`` minutes (start-up: allocator pools, torch and optimiser state fill up early),
- the same for PSS (shared pages split between the processes) if readable.

The samples go to a CSV and the summary to a JSON. It measures memory, not speed: run it niced.

    nice -n 19 .venv/bin/python benchmarks/memory_flat.py --minutes 30 \
        --out benchmarks/results/2core-memory-flat-1v1

Uses psutil if installed, else Linux ``/proc``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

try:
    import psutil
except ImportError:  # pragma: no cover - /proc fallback
    psutil = None


# ---------------------------------------------------------------------- process memory


def _children_proc(pid: int) -> list[int]:
    """All descendants of ``pid`` from /proc (no psutil)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def _proc_kb(path: str, key: str) -> int | None:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def sample(pid: int) -> tuple[float, float | None, int]:
    """(total RSS MB, total PSS MB or None, process count) of ``pid`` and its descendants."""
    if psutil is not None:
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0.0, None, 0
        rss = 0
        pss: int | None = 0
        for p in procs:
            with contextlib.suppress(psutil.Error):
                rss += p.memory_info().rss
                try:
                    full = p.memory_full_info()
                    if pss is not None:
                        pss += getattr(full, "pss", 0)
                except psutil.Error:
                    pss = None
        return rss / 2**20, (pss / 2**20 if pss else None), len(procs)
    pids = [pid, *_children_proc(pid)]
    rss_kb = sum(_proc_kb(f"/proc/{p}/status", "VmRSS:") or 0 for p in pids)
    pss_vals = [_proc_kb(f"/proc/{p}/smaps_rollup", "Pss:") for p in pids]
    pss_kb = None if any(v is None for v in pss_vals) else sum(v or 0 for v in pss_vals)
    return rss_kb / 1024, (pss_kb / 1024 if pss_kb is not None else None), len(pids)


# ---------------------------------------------------------------------- statistics


def slope_per_hour(t: list[float], y: list[float]) -> float | None:
    """Least-squares slope of ``y`` against ``t`` (seconds), in units of ``y`` per hour."""
    n = len(t)
    if n < 2:
        return None
    mt, my = sum(t) / n, sum(y) / n
    var = sum((a - mt) ** 2 for a in t)
    if var == 0:
        return None
    return sum((a - mt) * (b - my) for a, b in zip(t, y, strict=True)) / var * 3600.0


def slope_se_per_hour(t: list[float], y: list[float]) -> float | None:
    """Standard error of :func:`slope_per_hour` (ordinary least squares), per hour."""
    n = len(t)
    slope = slope_per_hour(t, y)
    if n < 3 or slope is None:
        return None
    mt, my = sum(t) / n, sum(y) / n
    b = slope / 3600.0
    resid = sum((yi - (my + b * (ti - mt))) ** 2 for ti, yi in zip(t, y, strict=True))
    var_t = sum((ti - mt) ** 2 for ti in t)
    return float((resid / (n - 2) / var_t) ** 0.5 * 3600.0)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarise(rows: list[dict[str, Any]], window_s: float, skip_s: float = 60.0) -> dict[str, Any]:
    """First/last-window means, extremes and slopes of the RSS and PSS columns.

    Samples of the first ``skip_s`` seconds (interpreter start, imports, building the arenas) are left
    out; the first window starts after them.
    """
    out: dict[str, Any] = {}
    rows = [r for r in rows if r["t_s"] >= skip_s]
    if not rows:
        return out
    start = rows[0]["t_s"]
    end = rows[-1]["t_s"]
    for col in ("rss_mb", "pss_mb"):
        pts = [(r["t_s"], r[col]) for r in rows if r[col] is not None]
        if not pts:
            continue
        t = [p[0] for p in pts]
        y = [p[1] for p in pts]
        first = [v for s, v in pts if s <= start + window_s]
        last = [v for s, v in pts if s >= end - window_s]
        after = [(s, v) for s, v in pts if s > start + window_s]
        out[col] = {
            "first_window_mean": _mean(first),
            "last_window_mean": _mean(last),
            "first_window_max": max(first) if first else None,
            "last_window_max": max(last) if last else None,
            "last_minus_first": (_mean(last) or 0.0) - (_mean(first) or 0.0) if first and last else None,
            "min": min(y),
            "max": max(y),
            "slope_mb_per_hour": slope_per_hour(t, y),
            "slope_se_mb_per_hour": slope_se_per_hour(t, y),
            "slope_mb_per_hour_after_first_window": slope_per_hour([a for a, _ in after], [b for _, b in after]),
        }
    return out


def _print_summary(summary: dict[str, Any], w: float, skip: float) -> None:
    for col, label in (("rss_mb", "RSS (trainer + children)"), ("pss_mb", "PSS (trainer + children)")):
        s = summary.get(col)
        if not s:
            continue
        slope2 = s["slope_mb_per_hour_after_first_window"]
        print(
            f"{label}, after the first {skip:g} s: first {w:g} min mean {s['first_window_mean']:.1f} MB "
            f"(max {s['first_window_max']:.1f}), last {w:g} min mean {s['last_window_mean']:.1f} MB "
            f"(max {s['last_window_max']:.1f}), diff {s['last_minus_first']:+.1f} MB; slope "
            f"{s['slope_mb_per_hour']:+.1f} ± {s['slope_se_mb_per_hour'] or 0:.1f} (s.e.) MB/h, "
            f"{'-' if slope2 is None else f'{slope2:+.1f}'} MB/h after the first {w:g} min"
        )


# ---------------------------------------------------------------------- the run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0, help="how long to run the trainer (default 30)")
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between samples (default 10)")
    ap.add_argument("--window", type=float, default=5.0, help="minutes averaged at the start and the end")
    ap.add_argument("--preset", default="1v1", help="speedflip preset (default 1v1)")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="config override passed to speedflip train (repeatable)")  # fmt: skip
    ap.add_argument("--speedflip", default=None, help="the speedflip executable (default: next to this python)")
    ap.add_argument("--run-dir", default=None, help="run directory (default: a temporary one, deleted after)")
    ap.add_argument("--skip", type=float, default=60.0, help="seconds of start-up left out of the figures")
    ap.add_argument("--out", default="memory_flat", help="output prefix: <out>.csv and <out>.json")
    ap.add_argument("--summarise", metavar="CSV", help="only print the figures of an earlier run's CSV")
    args = ap.parse_args(argv)
    if args.summarise:
        with open(args.summarise, newline="") as f:
            old_rows: list[dict[str, Any]] = [
                {
                    "t_s": float(r["t_s"]),
                    "rss_mb": float(r["rss_mb"]),
                    "pss_mb": float(r["pss_mb"]) if r["pss_mb"] else None,
                }
                for r in csv.DictReader(f)
            ]
        summary = summarise(old_rows, args.window * 60, args.skip)
        _print_summary(summary, args.window, args.skip)
        print(json.dumps(summary, indent=2))
        return 0

    exe = args.speedflip or str(Path(sys.executable).with_name("speedflip"))
    tmp = None
    run_dir = args.run_dir
    if run_dir is None:
        tmp = tempfile.mkdtemp(prefix="speedflip-memflat-")
        run_dir = str(Path(tmp) / "run")
    sets = [*args.sets, "run.total_steps=100000000000"]  # the wall clock ends the run, not the budget
    cmd = [exe, "train", "--preset", args.preset, "--run-dir", run_dir, "--new"]
    for s in sets:
        cmd += ["--set", s]
    out = Path(args.out)
    if out.parent != Path():
        out.parent.mkdir(parents=True, exist_ok=True)
    log_path = out.with_suffix(".log")
    print(f"memory_flat: {' '.join(cmd)}", flush=True)
    print(f"memory_flat: trainer log {log_path}; sampling every {args.interval:g} s for {args.minutes:g} min",
          flush=True)  # fmt: skip
    rows: list[dict[str, Any]] = []
    started = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        deadline = t0 + args.minutes * 60
        try:
            while True:
                now = time.monotonic()
                if proc.poll() is not None:
                    print(f"memory_flat: trainer exited early with code {proc.returncode}", flush=True)
                    break
                rss, pss, nproc = sample(proc.pid)
                rows.append({"t_s": round(now - t0, 2), "rss_mb": round(rss, 2),
                             "pss_mb": None if pss is None else round(pss, 2), "processes": nproc})  # fmt: skip
                if len(rows) % 30 == 1:
                    print(
                        f"  t={now - t0:7.0f} s  rss {rss:8.1f} MB  pss {pss or 0:8.1f} MB  procs {nproc}", flush=True
                    )
                if now >= deadline:
                    break
                time.sleep(min(args.interval, max(0.0, deadline - now) + 0.01))
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    tail = log_path.read_text(errors="replace").splitlines()[-5:]
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)

    with open(out.with_suffix(".csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["t_s", "rss_mb", "pss_mb", "processes"])
        writer.writeheader()
        writer.writerows(rows)
    summary = summarise(rows, args.window * 60, args.skip)
    result = {
        "command": cmd,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "minutes_requested": args.minutes,
        "seconds_sampled": rows[-1]["t_s"] if rows else 0.0,
        "interval_s": args.interval,
        "window_minutes": args.window,
        "skipped_seconds": args.skip,
        "samples": len(rows),
        "trainer_exit_code": proc.returncode,
        "trainer_log_tail": tail,
        "machine": {"cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "sampler": "psutil" if psutil is not None else "/proc",
        "summary": summary,
    }
    out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    _print_summary(summary, args.window, args.skip)
    print(f"memory_flat: wrote {out.with_suffix('.csv')} and {out.with_suffix('.json')}")
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
