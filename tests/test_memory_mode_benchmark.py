"""benchmarks/memory_mode.py: RocketSim's LIGHT and HEAVY memory modes compared on the same games, and timed."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from benchmark_modules import load_benchmark
from speedflip.env.sim import init_rocketsim


@pytest.fixture
def memory_mode() -> ModuleType:
    init_rocketsim()
    return load_benchmark("memory_mode")


def test_the_two_modes_play_the_same_game(memory_mode: ModuleType) -> None:
    """Two kickoffs, 10 s each with the same random controls: the states at the end are equal in both modes."""
    result = memory_mode.same_games(2, decisions=150)
    assert result == {"games": 2, "identical": 2, "worst_abs_difference": 0.0}


def test_the_games_differ_between_seeds(memory_mode: ModuleType) -> None:
    """The comparison can fail: in one mode, two kickoffs with their own controls end in different states."""
    first, second = (memory_mode.final_state(memory_mode.MODES["LIGHT"], seed, decisions=30) for seed in (0, 1))
    assert any((a != b).any() for a, b in zip(first, second, strict=True))


def test_speed_reports_every_round_of_both_modes(memory_mode: ModuleType) -> None:
    result = memory_mode.speed(num_arenas=2, rounds=2)
    assert set(result) == {"LIGHT", "HEAVY"}
    for row in result.values():
        assert len(row["rounds"]) == 2 and row["first_round"] > 0
        assert row["median"] == float(np.mean(row["rounds"]))  # the median of two rounds is their mean
