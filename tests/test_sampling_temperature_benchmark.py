"""benchmarks/sampling_temperature.py: the sharpened sampling and what it counts (no games played)."""

from __future__ import annotations

import math
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest
import torch

from benchmark_modules import load_benchmark


@pytest.fixture
def sampling_temperature() -> ModuleType:
    return load_benchmark("sampling_temperature")


def fake_policy(logits: list[list[float]]) -> SimpleNamespace:
    """A stand-in for a loaded checkpoint whose network returns fixed logits for every observation."""
    fixed = torch.tensor(logits)
    return SimpleNamespace(
        logits=lambda obs: fixed,
        table=np.zeros((3, 8), np.float32),
        name="fake@0",
        reset=lambda rows: None,
    )


def test_temperature_zero_plays_the_argmax_and_counts_no_stray_decision(sampling_temperature: ModuleType) -> None:
    player = sampling_temperature.TemperaturePlayer(fake_policy([[2.0, 0.0, 0.0], [0.0, 0.0, 1.0]]), 0.0, seed=0)
    obs = np.zeros((2, 4), np.float32)
    for _ in range(5):
        assert player.act(obs, None, np.zeros(2, np.int64)).tolist() == [0, 2]
    assert float(np.concatenate(player.off_argmax).mean()) == 0.0
    # the top row's probability of the policy as trained (T = 1), by hand: e^2 / (e^2 + 2) and e / (e + 2)
    top = player.top_probability[0]
    assert top[0] == pytest.approx(math.e**2 / (math.e**2 + 2), rel=1e-5)
    assert top[1] == pytest.approx(math.e / (math.e + 2), rel=1e-5)


def test_a_lower_temperature_leaves_the_argmax_less_often(sampling_temperature: ModuleType) -> None:
    # three rows, logits 1, 0, 0: at T = 1 the argmax has e / (e + 2) = 0.576; at T = 0.5 e^2 / (e^2 + 2) = 0.787
    logits = [[1.0, 0.0, 0.0]] * 4000
    obs = np.zeros((4000, 4), np.float32)
    shares = {}
    for temperature in (1.0, 0.5):
        player = sampling_temperature.TemperaturePlayer(fake_policy(logits), temperature, seed=3)
        player.act(obs, None, np.zeros(4000, np.int64))
        shares[temperature] = float(player.off_argmax[0].mean())
    assert shares[1.0] == pytest.approx(1 - math.e / (math.e + 2), abs=0.03)
    assert shares[0.5] == pytest.approx(1 - math.e**2 / (math.e**2 + 2), abs=0.03)
