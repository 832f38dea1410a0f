"""How busy a collector keeps the machine: agent steps/s of the trainer's own rollouts and the CPU time of this
process and of its worker processes over them (Linux: ``/proc/<pid>/stat``), so ``cores used`` = CPU time / wall.

    python benchmarks/collector_cpu.py --collector inprocess pipelined --rollouts 6
    python benchmarks/collector_cpu.py --collector pipelined --set run.num_workers=4

One JSON line per collector. It answers whether a collector is bound by the work or by waiting (a collector that
keeps 1.2 of 2 cores busy leaves room that overlapping could fill).
"""

from __future__ import annotations

import argparse
import json
import os
import time

from speedflip.bench import bench_config
from speedflip.train.trainer import Trainer


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(collector: str, rollouts: int, preset: str, overrides: list[str]) -> dict[str, object]:
    trainer = Trainer(bench_config(preset, overrides=[f"run.collector={collector}", *overrides]))
    try:
        trainer.collect()  # warm-up: workers started, first inference done
        pids = [p for p in getattr(trainer.env, "pids", []) if p]
        start, parent0, workers0 = time.perf_counter(), os.times(), [cpu_seconds(p) for p in pids]
        steps = 0
        for _ in range(rollouts):
            _, _, stats = trainer.collect()
            steps += stats.steps
        wall = time.perf_counter() - start
        parent1 = os.times()
        parent = (parent1.user - parent0.user) + (parent1.system - parent0.system)
        workers = sum(cpu_seconds(p) - before for p, before in zip(pids, workers0, strict=True))
    finally:
        trainer.close()
    return {
        "collector": collector, "overrides": overrides, "agent_steps": steps, "wall_seconds": round(wall, 3),
        "agent_sps": round(steps / wall, 1), "parent_cpu_seconds": round(parent, 3),
        "workers_cpu_seconds": round(workers, 3), "cores_used": round((parent + workers) / wall, 3),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collector", nargs="+", default=["inprocess", "pipelined"])
    parser.add_argument("--rollouts", type=int, default=6)
    parser.add_argument("--preset", default="1v1")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    for collector in args.collector:
        print(json.dumps(measure(collector, args.rollouts, args.preset, args.overrides)), flush=True)


if __name__ == "__main__":
    main()
