"""``speedflip bench`` end to end on a tiny config: every figure is measured and the JSON has them all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from speedflip.bench import BenchOptions, Stopwatch, instrument, print_report, run_bench, write_json
from speedflip.cli import main
from speedflip.config import load_preset


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    def inner(self) -> int:
        self.calls += 1
        return self.calls

    def outer(self) -> int:
        return self.inner() + 1


def test_instrument_times_one_object_and_counts_nested_calls_once() -> None:
    watch = Stopwatch()
    timed, plain = Counter(), Counter()
    instrument(timed, "outer", "work", watch)
    instrument(timed, "inner", "work", watch)
    assert timed.outer() == 2 and isinstance(timed, Counter)
    assert plain.outer() == 2
    assert set(watch.totals) == {"work"} and watch.totals["work"] > 0
    watch.enabled = False
    before = watch.totals["work"]
    timed.outer()
    assert watch.totals["work"] == before


@pytest.mark.timeout(120)
def test_tiny_bench_measures_everything(tmp_path: Path) -> None:
    small = ["ppo.num_steps=8", "ppo.policy_layers=[32]", "ppo.critic_layers=[32]"]
    opts = BenchOptions(seconds=0.05, arenas=2, rounds=1, overrides=small)
    console = Console(record=True, width=140)
    results = run_bench(opts, console)
    for key in ("physics_agent_sps", "collect_agent_sps", "train_agent_sps", "rlgym_agent_sps"):
        assert results[key] > 0, key
    assert results["collect_agent_sps_by_backend"]["inprocess"] > 0
    assert results["collect_agent_sps_by_backend"]["multiprocess"] > 0
    assert results["collect_agent_sps_pipelined"] > 0
    # end to end both ways: what `speedflip train` builds and the other of in process / pipelined
    assert set(results["train_agent_sps_by_backend"]) == {"inprocess", "pipelined"}
    assert all(sps > 0 for sps in results["train_agent_sps_by_backend"].values())
    assert results["ratios_to_physics"]["collect"] > 0
    parts = results["breakdown_ms_per_1000_agent_steps"]["inprocess"]
    assert {"physics", "obs", "reward", "inference", "learn"} <= set(parts)
    assert all(v >= 0 for v in parts.values())
    # RSS growth: meaningful in a fresh `speedflip bench` process; here the test process may reuse freed memory
    assert results["memory"]["inprocess_mb_per_arena"] is None or results["memory"]["inprocess_mb_per_arena"] >= 0
    print_report(results, console)
    report = console.export_text()
    assert "physics limit" in report
    # the 1v1 preset overlaps the update with collection: the breakdown says where its time went
    assert "PPO update (inside collection: run.overlap_collection)" in report
    path = write_json(results, tmp_path / "out" / "bench.json")
    assert json.loads(path.read_text())["config"]["num_arenas"] == 2
    # the 1v1 preset plays the rule bot and the idle car in its pool arenas: worker processes drive them too (the
    # state in shared memory), so their figures are measured as configured
    assert results["kickstart_note"] is None
    preset = load_preset("1v1")["selfplay"]
    resolved = results["config"]["resolved"]["selfplay"]
    assert preset["opponent_share"] > 0 and preset["idle_share"] > 0
    for key in ("opponent_share", "rule_share", "idle_share"):
        assert resolved[key] == preset[key], key  # training as configured


@pytest.mark.timeout(120)
def test_bench_of_a_kickstarted_preset_measures_worker_processes_with_the_kickstart() -> None:
    # `quick` kickstarts from the rule bot; the parent labels the workers' published states, nothing is dropped
    small = ["ppo.num_steps=8", "ppo.policy_layers=[32]", "ppo.critic_layers=[32]", "ppo.kickstart_coef=0.5"]
    opts = BenchOptions(seconds=0.05, arenas=2, rounds=1, preset="quick", overrides=small, rlgym=False, scaling=False)
    console = Console(record=True, width=140)
    results = run_bench(opts, console)
    assert results["collect_agent_sps_by_backend"]["multiprocess"] > 0
    assert results["train_agent_sps"] > 0
    assert results["config"]["resolved"]["ppo"]["kickstart_coef"] == 0.5  # training as configured
    assert results["kickstart_note"] is None
    print_report(results, console)
    assert "worker-process figures are measured without them" not in console.export_text()


def test_cli_rejects_bad_bench_arguments() -> None:
    assert main(["bench", "--seconds", "0"]) == 2
    assert main(["bench", "--arenas", "0"]) == 2
