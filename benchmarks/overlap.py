"""End-to-end training throughput with and without overlapping collection and learning.

Builds two trainers from the same preset (``run.overlap_collection`` off and on) and alternates
rounds of ``iterations`` collect+update iterations between them, so both see the same machine load;
prints the median agent steps per second of each and the ratio, and writes JSON with ``--json``.

    python benchmarks/overlap.py --preset 1v1 --rounds 5 --iterations 3 --json benchmarks/results/overlap.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from speedflip.config import resolve_config
from speedflip.train.trainer import Trainer


def measure(trainer: Trainer, iterations: int) -> float:
    """Agent steps per second over ``iterations`` collect+update iterations (wall clock)."""
    start_step, start = trainer.global_step, time.perf_counter()
    for _ in range(iterations):
        batch, raw_obs, _ = trainer.collect()
        trainer.update(batch, raw_obs)
    return (trainer.global_step - start_step) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="1v1")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=3, help="collect+update iterations per round")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    overrides = [*args.set, "run.tensorboard=false", "run.milestone_replays=false"]
    trainers = {
        mode: Trainer(resolve_config(args.preset, overrides=[*overrides, f"run.overlap_collection={mode == 'on'}"]))
        for mode in ("off", "on")
    }
    try:
        for trainer in trainers.values():
            measure(trainer, 1)  # warm up (first rollout, first update)
        results: dict[str, list[float]] = {"off": [], "on": []}
        for r in range(args.rounds):
            for mode, trainer in trainers.items():
                results[mode].append(measure(trainer, args.iterations))
            print(f"round {r + 1}: off {results['off'][-1]:,.0f}  on {results['on'][-1]:,.0f} agent steps/s")
    finally:
        for trainer in trainers.values():
            trainer.close()
    off, on = statistics.median(results["off"]), statistics.median(results["on"])
    summary: dict[str, Any] = {
        "preset": args.preset,
        "overrides": args.set,
        "cores": os.cpu_count(),
        "load_average_1min": os.getloadavg()[0],
        "train_agent_sps_sequential": off,
        "train_agent_sps_overlap": on,
        "ratio": on / off,
        "rounds": results,
    }
    print(f"median: sequential {off:,.0f}, overlap {on:,.0f} agent steps/s ({on / off:.2f}x)")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
