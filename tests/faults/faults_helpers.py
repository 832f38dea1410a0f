"""Shared pieces of the fault-injection suite (imported by its tests and by benchmarks/faults_report.py).

Everything here drives the real ``speedflip train`` command in a subprocess on a tiny config (2 arenas
1v1, 16 steps per rollout, 16-unit networks, in-process collector) and inspects the run directory
with code independent of the one under test (its own SHA-256 check of every checkpoint file).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STEPS_PER_ITERATION = 2 * 2 * 16  # 2 arenas x 2 cars x 16 steps
INTERVAL = 2 * STEPS_PER_ITERATION  # checkpoint every 2 iterations (128 agent steps)
BIG = 10_000_000  # a budget a test run never reaches: it is killed or stopped first
SAVE_DELAY_ENV = "SPEEDFLIP_FAULT_SAVE_DELAY"

TINY = [
    "--set", "env.num_arenas=2",
    "--set", "ppo.num_steps=16",
    "--set", "ppo.minibatch_size=32",
    "--set", "ppo.update_epochs=1",
    "--set", "ppo.policy_layers=[16]",
    "--set", "ppo.critic_layers=[16]",
    "--set", f"run.checkpoint_interval_steps={INTERVAL}",
    "--set", "run.keep_checkpoints=3",
    "--set", "run.milestone_replays=false",
    "--set", "run.tensorboard=false",
    "--set", "run.collector=inprocess",
    "--set", "run.device=cpu",
    "--set", "run.num_threads=1",
    "--set", "run.torch_threads=1",
]  # fmt: skip


def train_cmd(run_dir: Path, total_steps: int, *extra: str) -> list[str]:
    """The ``speedflip train`` command line for the tiny config."""
    return [
        sys.executable, "-m", "speedflip.cli", "train", "--preset", "quick", "--run-dir", str(run_dir),
        *TINY, "--set", f"run.total_steps={total_steps}", *extra,
    ]  # fmt: skip


def train_env(save_delay: float | None = None) -> dict[str, str]:
    """Environment for a trainer subprocess: wide, unwrapped output; optionally slow checkpoint saves."""
    env = {**os.environ, "COLUMNS": "400", "PYTHONIOENCODING": "utf-8", "OMP_NUM_THREADS": "1"}
    env.pop(SAVE_DELAY_ENV, None)
    if save_delay:
        env[SAVE_DELAY_ENV] = str(save_delay)
    return env


@dataclass
class Result:
    """A finished trainer process."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_train(
    run_dir: Path,
    total_steps: int,
    *extra: str,
    save_delay: float | None = None,
    timeout: float = 180.0,
    preexec_fn: Callable[[], None] | None = None,
    wrapper: Sequence[str] = (),
) -> Result:
    """Run ``speedflip train`` to its end."""
    start = time.perf_counter()
    out = subprocess.run(
        [*wrapper, *train_cmd(run_dir, total_steps, *extra)],
        env=train_env(save_delay),
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=preexec_fn,
        check=False,
    )
    return Result(out.returncode, out.stdout, out.stderr, time.perf_counter() - start)


class Trainer:
    """A trainer subprocess whose output goes to files (no pipe can fill up and stall it)."""

    def __init__(self, run_dir: Path, total_steps: int, *extra: str, save_delay: float | None = None) -> None:
        self.run_dir = run_dir
        logs = run_dir.parent / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        stamp = time.time_ns()
        self.out_path = logs / f"{stamp}.out"
        self.err_path = logs / f"{stamp}.err"
        self.metrics_before = len(metric_records(run_dir))
        with self.out_path.open("w") as out, self.err_path.open("w") as err:
            self.proc = subprocess.Popen(
                train_cmd(run_dir, total_steps, *extra), env=train_env(save_delay), stdout=out, stderr=err
            )

    @property
    def output(self) -> str:
        return self.out_path.read_text(errors="replace") + self.err_path.read_text(errors="replace")

    def new_records(self) -> list[dict[str, Any]]:
        """metrics.jsonl records written by this process."""
        return metric_records(self.run_dir)[self.metrics_before :]

    def wait_for(self, condition: Callable[[], bool], timeout: float = 90.0, what: str = "") -> None:
        """Poll ``condition`` every 5 ms; fail if the process exits or the time runs out first."""
        deadline = time.monotonic() + timeout
        while not condition():
            if self.proc.poll() is not None:
                raise AssertionError(f"trainer exited ({self.proc.returncode}) waiting for {what}:\n{self.output}")
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"timed out waiting for {what}:\n{self.output}")
            time.sleep(0.005)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL (kill -9) and reap."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def wait(self, timeout: float = 60.0) -> int:
        return self.proc.wait(timeout=timeout)


# ---------------------------------------------------------------------- run directory, checked independently
def metric_records(run_dir: Path) -> list[dict[str, Any]]:
    """Complete lines of metrics.jsonl (a line cut by a kill is not a record)."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def checkpoint_dirs(run_dir: Path) -> list[Path]:
    """Numbered checkpoint folders, newest first."""
    folder = run_dir / "checkpoints"
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: -int(p.name))


def independently_good(path: Path) -> bool:
    """True if meta.json parses and every file it lists matches its SHA-256 (not using speedflip's code)."""
    try:
        meta = json.loads((path / "meta.json").read_text())
        sums = meta["sha256"]
        if set(sums) != {"model.safetensors", "optimizer.safetensors", "state.safetensors", "optimizer.json"}:
            return False
        return all(hashlib.sha256((path / name).read_bytes()).hexdigest() == digest for name, digest in sums.items())
    except (OSError, ValueError, KeyError, TypeError):
        return False


def newest_good_step(run_dir: Path) -> int | None:
    for path in checkpoint_dirs(run_dir):
        if independently_good(path):
            return int(path.name)
    return None


def tmp_folders(run_dir: Path) -> list[Path]:
    folder = run_dir / "checkpoints"
    return sorted(folder.glob(".tmp-*")) if folder.is_dir() else []


RESUMED = re.compile(r"resumed from[\s│|]+(\S+)")


def resumed_from(output: str) -> Path | None:
    """The checkpoint the run summary says it resumed from (None: a fresh start)."""
    match = RESUMED.search(output)
    if match is None:
        raise AssertionError(f"no 'resumed from' line in the output:\n{output}")
    text = match.group(1)
    return None if text == "-" else Path(text)


def tree_hashes(root: Path) -> dict[str, str]:
    """Relative path -> SHA-256 of every file below ``root`` (folders as 'dir'); the run-dir lock file
    (``.lock``: who is training there, no run data) is left out."""
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        if p.name == ".lock":
            continue
        out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
    return out


def flip_byte(path: Path, offset: int | None = None) -> None:
    data = bytearray(path.read_bytes())
    i = len(data) // 2 if offset is None else offset
    data[i] ^= 0x01
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


# ---------------------------------------------------------------------- the kill -9 loop
@dataclass
class KillReport:
    """What the kill loop measured."""

    tried: int = 0
    survived: int = 0
    mid_save: int = 0
    steps_lost: list[int] = field(default_factory=list)
    corrupt_loaded: int = 0
    failures: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        lost = self.steps_lost
        return {
            "kills_tried": self.tried,
            "kills_survived": self.survived,
            "kills_mid_save": self.mid_save,
            "steps_lost_max": max(lost) if lost else None,
            "steps_lost_mean": sum(lost) / len(lost) if lost else None,
            "checkpoint_interval": INTERVAL,
            "corrupt_checkpoints_loaded": self.corrupt_loaded,
            "failures": self.failures,
        }


def _check_resume(proc: Trainer, expected: int | None, reached: int, report: KillReport) -> str | None:
    """After the resumed process logged a record: it loaded the newest good checkpoint, lost <= one interval."""
    loaded = resumed_from(proc.output)
    if loaded is not None and (not loaded.name.isdigit() or not independently_good(loaded)):
        report.corrupt_loaded += 1
        return f"loaded {loaded}, which is not a complete, verified checkpoint"
    step = int(loaded.name) if loaded is not None else None
    if step != expected:
        return f"resumed from {step}, but the newest good checkpoint was {expected}"
    lost = reached - (step or 0)
    if expected is not None or reached:
        report.steps_lost.append(lost)
    first = proc.new_records()[0]["global_step"]
    if first != (step or 0) + STEPS_PER_ITERATION:
        return f"the step counter did not continue from {step}: first record at {first}"
    if lost > INTERVAL:
        return f"{lost} steps lost, more than one checkpoint interval ({INTERVAL})"
    return None


def kill_loop(run_dir: Path, kills: int, seed: int, save_delay: float = 0.15, max_wait: float = 2.0) -> KillReport:
    """Start the trainer, SIGKILL it at a seeded random moment, resume, ``kills`` times; then finish the run.

    Every other kill waits for a checkpoint save to be in progress (its ``.tmp-*`` folder exists; saves
    are slowed by ``save_delay`` seconds between writing the files and the rename) and kills inside it.
    After each kill the next start must resume from the newest checkpoint that verifies (checked here
    independently), lose at most one checkpoint interval of steps, and never load anything else.
    """
    rng = random.Random(seed)
    report = KillReport()
    reached = 0  # the highest global_step in metrics.jsonl when the last process died
    for i in range(kills + 1):
        expected = newest_good_step(run_dir)
        final = i == kills
        proc = Trainer(run_dir, reached + 2 * INTERVAL if final else BIG, save_delay=save_delay)
        try:
            proc.wait_for(lambda p=proc: len(p.new_records()) > 0, what="the first metrics record")
        except AssertionError as err:
            report.failures.append(f"start {i}: {err}")
            proc.kill()
            break
        problem = _check_resume(proc, expected, reached, report)
        if problem is not None:
            report.failures.append(f"start {i}: {problem}")
        elif i > 0:
            report.survived += 1
        if final:
            code = proc.wait(timeout=120)
            if code != 0 or "Traceback" in proc.output:
                report.failures.append(f"final run exited {code}:\n{proc.output}")
            break
        report.tried += 1
        if i % 2 == 1:  # land inside a checkpoint save
            already = set(tmp_folders(run_dir))
            try:
                proc.wait_for(
                    lambda a=already: bool(set(tmp_folders(run_dir)) - a),
                    timeout=60,
                    what="a checkpoint save",
                )
                time.sleep(rng.uniform(0.0, save_delay))
                report.mid_save += int(bool(set(tmp_folders(run_dir)) - already))
            except AssertionError as err:
                report.failures.append(f"kill {i}: {err}")
        else:
            time.sleep(rng.uniform(0.0, max_wait))
        proc.kill()
        reached = max(r["global_step"] for r in proc.new_records())
        bad = [p.name for p in checkpoint_dirs(run_dir) if not independently_good(p)]
        if bad:
            report.failures.append(f"kill {i}: numbered checkpoint folders that do not verify: {bad}")
    return report


def tiny_config(total_steps: int, *extra: str) -> Any:
    """The tiny config as a :class:`speedflip.config.Config` (for in-process runs of ``train``)."""
    from speedflip.config import resolve_config

    sets = [*TINY, "--set", f"run.total_steps={total_steps}", *extra]
    pairs = zip(sets[::2], sets[1::2], strict=True)
    return resolve_config("quick", overrides=[value for flag, value in pairs if flag == "--set"])


def descendants(pid: int) -> list[int]:
    """Process ids below ``pid`` (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def worker_pids(pid: int) -> list[int]:
    """Collection workers of the trainer ``pid``: descendants without children that are not the
    multiprocessing resource tracker or fork server."""
    found = []
    below = descendants(pid)
    for child in below:
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "resource_tracker" in cmdline or descendants(child):
            continue
        found.append(child)
    return found
