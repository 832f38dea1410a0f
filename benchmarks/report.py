"""Markdown tables from ``speedflip bench --json`` and ``benchmarks/scaling.py --json`` results.

    .venv/bin/python benchmarks/report.py benchmarks/results/bench-2core.json [more.json ...]
    .venv/bin/python benchmarks/report.py --scaling benchmarks/results/scaling-2core.json

Used to write docs/performance.md from real runs (no number is typed by hand).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _n(x: float | None, spec: str = ",.0f") -> str:
    return "-" if x is None else format(x, spec)


def _pct(x: float | None, base: float | None) -> str:
    return "-" if x is None or not base else f"{x / base:.0%}"


def bench_tables(paths: list[Path]) -> str:
    runs = [json.loads(p.read_text()) for p in paths]
    head = "| measurement | " + " | ".join(_label(r) for r in runs) + " |"
    lines = [head, "|---" * (len(runs) + 1) + "|"]

    def row(label: str, get: Any, load_key: Any = None) -> None:
        cells = []
        for r in runs:
            try:
                value = get(r)
            except (KeyError, TypeError):  # a figure this result file does not have
                value = None
            if callable(load_key):
                try:
                    load = load_key(r)
                except (KeyError, TypeError):
                    load = None
            else:
                load = r["other_load_cores"].get(load_key) if load_key else None
            cell = f"{_n(value)} ({_pct(value, r['physics_agent_sps'])})"
            if load is not None and load >= 0.2:
                cell += f" [other load {load:.1f}]"
            cells.append(cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    row("physics limit, all cores (raw `Arena.step`)", lambda r: r["physics_agent_sps"], "physics")
    row("physics, one thread", lambda r: r["physics_agent_sps_1thread"], "physics_1thread")
    row("env only, in-process (random actions)", lambda r: r["env_only_agent_sps_by_backend"]["inprocess"],
        "env_only_inprocess")  # fmt: skip
    row("env only, worker processes", lambda r: r["env_only_agent_sps_by_backend"]["multiprocess"],
        "env_only_multiprocess")  # fmt: skip
    row("**collect**, in-process threads", lambda r: r["collect_agent_sps_by_backend"]["inprocess"],
        "collect_inprocess")  # fmt: skip
    row("**collect**, worker processes", lambda r: r["collect_agent_sps_by_backend"]["multiprocess"],
        "collect_multiprocess")  # fmt: skip
    alt = "collect_agent_sps_alt_torch_by_backend"
    row("collect, in-process, the other torch thread count", lambda r: r[alt]["inprocess"], "collect_inprocess_alt")
    row("collect, workers, the other torch thread count", lambda r: r[alt]["multiprocess"], "collect_multiprocess_alt")
    row("collect, pipelined worker groups (not used by the trainer yet)", lambda r: r["collect_agent_sps_pipelined"],
        "collect_pipelined")  # fmt: skip
    row("collect at twice the arenas (auto backend)", lambda r: r["collect_agent_sps_2x_arenas"], "collect_2x_arenas")
    row("**train** end to end (auto backend)", lambda r: r["train_agent_sps"], "train")
    row("RLGym v2 loop + same inference", lambda r: r["rlgym_agent_sps"], "rlgym")
    row("RLGym v2 loop + same inference, the other torch thread count", lambda r: r["rlgym_agent_sps_alt_torch"],
        "rlgym_alt")  # fmt: skip
    row("RLGym v2 loop, env only", lambda r: r["rlgym_env_only_agent_sps"], "rlgym_env_only")
    if any(r.get("peer_rlgym_learn") for r in runs):
        row("peer: rlgym-learn PPO train end to end (`--peer rlgym-learn`)", lambda r: r["peer_rlgym_learn_agent_sps"],
            lambda r: r["peer_rlgym_learn"]["other_load_cores"])  # fmt: skip
        lines.append(
            "| train / rlgym-learn | "
            + " | ".join(f"{_n(r.get('train_vs_peer_rlgym_learn'), '.2f')}x" for r in runs)
            + " |"
        )
    out = ["Agent steps per second (share of the physics limit) [CPU cores other processes used meanwhile]:", ""]
    out += lines
    out += ["", "Time per 1000 agent steps (ms):", ""]
    parts = ["physics", "obs", "reward", "env_other", "env_workers", "inference", "trainer_bookkeeping", "learn"]
    names = {
        "physics": "physics + state export",
        "obs": "observations",
        "reward": "rewards",
        "env_other": "env: actions, dones, resets",
        "env_workers": "env step in the workers (parent waits)",
        "inference": "inference (policy + value)",
        "trainer_bookkeeping": "trainer: normalise, buffers, GAE",
        "learn": "PPO update",
    }
    cols = [(r, b) for r in runs for b in r["breakdown_ms_per_1000_agent_steps"]]
    out.append("| part | " + " | ".join(f"{b}, torch threads {r['machine']['torch_threads']}" for r, b in cols) + " |")
    out.append("|---" * (len(cols) + 1) + "|")
    for key in parts:
        cells = []
        for r, b in cols:
            d = r["breakdown_ms_per_1000_agent_steps"][b]
            total = sum(d.values())
            cells.append(f"{_n(d.get(key), '.1f')} ({_pct(d.get(key), total)})" if key in d else "-")
        out.append(f"| {names[key]} | " + " | ".join(cells) + " |")
    out += ["", "Memory:", ""]
    for r in runs:
        m = r["memory"]
        workers = ", ".join(_n(x, ".0f") for x in m["multiprocess_worker_pss_mb"])
        out.append(
            f"- {_label(r)}: {_n(m['inprocess_mb_per_arena'], '.2f')} MB per arena in process "
            f"({_n(m['inprocess_env_mb_per_arena_at_2x'], '.2f')} MB per arena for a whole env of "
            f"{2 * r['config']['num_arenas']}); worker processes {workers} MB PSS each; RLGym "
            f"{_n(m['rlgym_mb_per_env'], '.2f')} MB per env"
        )
    out += ["", "Targets (reported, not enforced):", ""]
    for r in runs:
        met = [f"{k} {_n(v['value'], '.2f')} ({'met' if v['met'] else 'not met'})" for k, v in r["targets"].items()]
        out.append(f"- {_label(r)}: " + "; ".join(met))
    return "\n".join(out) + "\n"


def _label(r: dict[str, Any]) -> str:
    over = ", ".join(r["config"]["overrides"]) or "default config"
    threads = r["machine"]["torch_threads"]
    alt = r.get("torch_threads_alt")
    other = f"; other count: {alt}" if alt else ""
    return f"{r['config']['team_size']} {r['config']['num_arenas']} arenas, {over} (torch threads {threads}{other})"


def scaling_tables(path: Path) -> str:
    data = json.loads(path.read_text())
    out = [f"Overrides for every config: {', '.join(data.get('overrides') or []) or 'none'}.", ""]
    for group, rows in data["groups"].items():
        out += [f"**{group}**", "", "| config | agents | agent steps/s | other load (cores) |", "|---|---|---|---|"]
        for name, row in rows.items():
            out.append(f"| {name} | {row['agents']} | {_n(row['agent_sps'])} | {_n(row['other_load_cores'], '.2f')} |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bench", nargs="*", type=Path, help="speedflip bench JSON files")
    parser.add_argument("--scaling", type=Path, help="a benchmarks/scaling.py JSON file")
    args = parser.parse_args(argv)
    if args.bench:
        sys.stdout.write(bench_tables(args.bench))
    if args.scaling:
        sys.stdout.write(scaling_tables(args.scaling))
    return 0


if __name__ == "__main__":
    sys.exit(main())
