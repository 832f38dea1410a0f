"""How collection scales with arenas, team sizes, processes/threads and torch threads.

    .venv/bin/python benchmarks/scaling.py --seconds 6 --json benchmarks/results/scaling.json

Every figure is the trainer's own rollout (``Trainer.collect``: physics, observations, rewards,
resets, policy + value inference of the 1v1 preset's 256x256x256 networks) in agent steps per
second. The configs of each group are measured in interleaved rounds (see
``speedflip.bench.measure_group``) so that other load on the machine hits them alike; the CPU
other processes used meanwhile is printed next to each figure. Groups:

- ``arenas``: 16..256 arenas, 1v1, each backend;
- ``teams``: 1v1 / 2v2 / 3v3 at the same number of *agents* (128), each backend;
- ``workers``: in-process with 1..N physics threads, multi-process with 1..N+1 workers;
- ``torch``: torch intra-op threads 1 vs all cores for each backend.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from speedflip.bench import bench_config, measure_group
from speedflip.config import Config

EXTRA: list[str] = []  # --set overrides applied to every config


def variant(arenas: int, team: int = 1, **run: Any) -> Config:
    sets = [*EXTRA, f"env.blue_size={team}", f"env.orange_size={team}"]
    sets += [f"run.{key}={value}" for key, value in run.items()]
    sets.append("ppo.num_steps=32")  # shorter rollouts: finer interleaving, same per-step work
    sets.append("ppo.kickstart_coef=0")  # worker processes cannot label for the kickstart: backends like for like
    return bench_config("1v1", arenas, sets)


def groups(cores: int, only: set[str] | None) -> dict[str, dict[str, Config]]:
    out: dict[str, dict[str, Config]] = {}
    out["arenas"] = {
        f"{backend} {k} arenas": variant(k, collector=backend)
        for k in (16, 32, 64, 128, 256)
        for backend in ("inprocess", "multiprocess")
    }
    out["teams"] = {
        f"{backend} {t}v{t} ({128 // (2 * t)} arenas)": variant(128 // (2 * t), team=t, collector=backend)
        for t in (1, 2, 3)
        for backend in ("inprocess", "multiprocess")
    }
    workers: dict[str, Config] = {}
    for n in range(1, cores + 1):
        workers[f"inprocess {n} physics thread(s)"] = variant(64, collector="inprocess", num_threads=n)
    for n in range(1, cores + 2):
        workers[f"multiprocess {n} worker(s)"] = variant(64, collector="multiprocess", num_workers=n)
    out["workers"] = workers
    out["torch"] = {
        f"{backend} torch threads {t}": variant(64, collector=backend, torch_threads=t)
        for backend in ("inprocess", "multiprocess")
        for t in sorted({1, cores})
    }
    return {k: v for k, v in out.items() if only is None or k in only}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=6.0, help="seconds per config (over all rounds)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--groups", help="comma list of groups (arenas,teams,workers,torch); default all")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override for every config")
    args = parser.parse_args(argv)
    EXTRA[:] = args.set
    console = Console()
    cores = os.cpu_count() or 1
    only = set(args.groups.split(",")) if args.groups else None
    results: dict[str, Any] = {
        "cores": cores,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "overrides": args.set,
        "groups": {},
    }
    for group, configs in groups(cores, only).items():
        console.log(f"group '{group}': {len(configs)} configs")
        measured = measure_group(configs, args.seconds, args.rounds, say=console.log)
        results["groups"][group] = measured
        table = Table(title=f"collection: {group}", title_justify="left")
        for col in ("config", "agents", "agent steps/s", "other load (cores)"):
            table.add_column(col, justify="left" if col == "config" else "right")
        for name, row in measured.items():
            load = row["other_load_cores"]
            table.add_row(name, str(row["agents"]), f"{row['agent_sps']:,.0f}", "-" if load is None else f"{load:.2f}")
        console.print(table)
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=2) + "\n")
        console.print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
