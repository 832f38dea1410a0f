"""benchmarks/mirror_kl.py: the distance of a policy from its mirror by hand, and a real match on a tiny run."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch

from benchmark_modules import BENCHMARKS, load_benchmark
from speedflip.rollout import Mirror

TESTS = Path(__file__).parent
# three actions: 0 and 1 swap (left / right), 2 is its own mirror
SWAP = Mirror(np.arange(2), np.ones(2, np.float32), np.array([1, 0, 2]))


@pytest.fixture
def mirror_kl(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # it imports ball_zones and match_setup beside it
    return load_benchmark("mirror_kl")


def test_mirror_distance_by_hand(mirror_kl: ModuleType) -> None:
    # state 1: p = (0.5, 0.25, 0.25); in the mirrored state pi = (0.25, 0.5, 0.25), so q(a) = pi(mirror(a)) =
    # (0.5, 0.25, 0.25) = p: a symmetric policy (KL 0, same argmax, TV 0).
    # state 2: p = (0.5, 0.25, 0.25); mirrored pi = (0.5, 0.25, 0.25) -> q = (0.25, 0.5, 0.25):
    # KL = 0.5 ln 2 + 0.25 ln 0.5 = 0.25 ln 2; argmax 0 vs 1 differs; TV = 0.5 * (0.25 + 0.25) = 0.25.
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25], [0.5, 0.25, 0.25]]))
    mirrored = torch.log(torch.tensor([[0.25, 0.5, 0.25], [0.5, 0.25, 0.25]]))
    d = mirror_kl.mirror_distance(logits, mirrored, SWAP)
    assert d.decisions == 2
    assert d.kl == pytest.approx(0.25 * math.log(2) / 2, abs=1e-6)
    assert d.argmax_differs == pytest.approx(0.5)
    assert d.tv == pytest.approx(0.125, abs=1e-6)


def test_a_real_match_reports_the_distance(mirror_kl: ModuleType, tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(TESTS / "selfplay"))
    try:
        from sp_helpers import train_tiny_run
    finally:
        sys.path.remove(str(TESTS / "selfplay"))
    run = tmp_path / "tiny1v1"
    train_tiny_run(run, team_size=1)
    out = tmp_path / "mirror.json"
    assert mirror_kl.main([str(run), "rule", "--games", "2", "--game-seconds", "2", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    distance = report["mirror"]
    assert distance["decisions"] == 2 * math.ceil(2 * 120 / 8)  # A's decisions only: 2 games of 30 steps
    assert distance["kl"] > 0.0 and 0.0 <= distance["argmax_differs"] <= 1.0 and 0.0 < distance["tv"] < 1.0
    assert mirror_kl.main([str(tmp_path / "missing"), "rule", "--games", "2"]) == 2
