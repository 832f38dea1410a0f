"""Fault-injection figures for docs/reliability.md (not in CI; the CI version is tests/faults/).

Runs, on the tiny config of the fault suite (2 arenas 1v1, 16-unit networks, a checkpoint every 128
agent steps, saves slowed by 0.15 s so kills land inside them):

1. the kill -9 loop with ``--kills`` kills at seeded random moments, every other one inside a
   checkpoint save, resuming after each (the same code as tests/faults/test_faults_kill.py);
2. ``--damage`` random damages of a real checkpoint (one byte flipped, truncated at a random length,
   a file deleted or emptied, in a random file of the checkpoint) each checked with speedflip's own
   ``verify_checkpoint`` and ``load_checkpoint`` (must raise ``CheckpointError`` every time);
3. every malformed input of tests/faults/fault_cases.py through ``speedflip.cli.main``.

Usage::

    python benchmarks/faults_report.py --kills 20 --json faults.json
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "faults"))

from fault_cases import CASES, check_case
from faults_helpers import checkpoint_dirs, kill_loop

from speedflip.checkpoint import CheckpointError, load_checkpoint, verify_checkpoint


def _damage(src: Path, dst: Path, rng: random.Random) -> str:
    """Copy checkpoint ``src`` to ``dst`` and damage one file at random; returns what was done."""
    shutil.copytree(src, dst)
    files = sorted(p for p in dst.iterdir() if p.is_file())
    target = rng.choice(files)
    data = bytearray(target.read_bytes())
    kind = rng.choice(["flip", "flip", "truncate", "delete", "empty"])
    if kind == "flip":
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
        target.write_bytes(bytes(data))
    elif kind == "truncate":
        target.write_bytes(bytes(data[: rng.randrange(len(data))]))
    elif kind == "delete":
        target.unlink()
    else:
        target.write_bytes(b"")
    return f"{kind} {target.name}"


def damage_sweep(checkpoint: Path, trials: int, seed: int, work: Path) -> dict[str, Any]:
    rng = random.Random(seed)
    detected = 0
    missed: list[str] = []
    for i in range(trials):
        copy = work / f"damaged-{i}"
        what = _damage(checkpoint, copy, rng)
        caught = 0
        for check in (verify_checkpoint, load_checkpoint):
            try:
                check(copy)
            except CheckpointError:
                caught += 1
        if caught == 2:
            detected += 1
        else:
            missed.append(what)
        shutil.rmtree(copy)
    return {"damaged_checkpoints_tried": trials, "damaged_checkpoints_detected": detected, "missed": missed}


def malformed_inputs(work: Path) -> dict[str, Any]:
    clear = 0
    tried = 0
    failed: dict[str, list[str]] = {}
    skipped: list[str] = []
    for case in CASES:
        folder = work / f"case-{case.name}"
        folder.mkdir()
        problems = check_case(case, folder)
        if problems is None:
            skipped.append(case.name)
            continue
        tried += 1
        if problems:
            failed[case.name] = problems[:-1]
        else:
            clear += 1
    return {"malformed_inputs_tried": tried, "malformed_inputs_clear": clear, "failed": failed, "skipped": skipped}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--damage", type=int, default=200, help="random checkpoint damages to check")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="speedflip-faults-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        kills = kill_loop(work / "kill" / "run", kills=args.kills, seed=args.seed).summary()
        kills["seconds"] = round(time.perf_counter() - t0, 1)
        print(f"kill loop: {json.dumps(kills)}", flush=True)
        newest = checkpoint_dirs(work / "kill" / "run")[0]
        damage = damage_sweep(newest, args.damage, args.seed, work)
        print(f"damage sweep: {json.dumps(damage)}", flush=True)
        (work / "inputs").mkdir()
        inputs = malformed_inputs(work / "inputs")
        print(f"malformed inputs: {json.dumps(inputs)}", flush=True)
    figures = {
        **{k: v for k, v in kills.items() if k != "failures"},
        "kill_failures": kills["failures"],
        **damage,
        **inputs,
        "seconds_total": round(time.perf_counter() - started, 1),
    }
    print()
    print(f"kills survived / tried:          {figures['kills_survived']}/{figures['kills_tried']} "
          f"({figures['kills_mid_save']} inside a checkpoint save)")  # fmt: skip
    print(f"steps lost per kill (max/mean): {figures['steps_lost_max']} / {figures['steps_lost_mean']:.1f} "
          f"(checkpoint interval {figures['checkpoint_interval']})")  # fmt: skip
    print(f"corrupt checkpoints loaded:     {figures['corrupt_checkpoints_loaded']}")
    detected, damaged = figures["damaged_checkpoints_detected"], figures["damaged_checkpoints_tried"]
    print(f"damaged checkpoints detected:   {detected}/{damaged}")
    print(f"malformed inputs, clear error:  {figures['malformed_inputs_clear']}/{figures['malformed_inputs_tried']}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    ok = (
        not figures["kill_failures"]
        and figures["corrupt_checkpoints_loaded"] == 0
        and figures["damaged_checkpoints_detected"] == figures["damaged_checkpoints_tried"]
        and figures["malformed_inputs_clear"] == figures["malformed_inputs_tried"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
