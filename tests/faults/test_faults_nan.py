"""Physics that returns NaN: the arena is quarantined and reset, training goes on, nothing NaN is saved."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import RocketSim as rsim
from faults_helpers import INTERVAL, checkpoint_dirs, independently_good, metric_records, tiny_config
from rich.console import Console

from speedflip.checkpoint import load_checkpoint
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.train.run import train


def test_nan_physics_is_quarantined_and_training_continues(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_step = RocketLeagueVecEnv.step
    injected = {"n": 0, "calls": 0}

    def step(self: RocketLeagueVecEnv, *args: object, **kwargs: object) -> object:
        injected["calls"] += 1
        if injected["calls"] % 7 == 0:  # the ball of arena (calls // 7) % arenas becomes NaN in the engine
            ball = rsim.BallState()
            ball.pos = rsim.Vec(float("nan"), 0.0, 500.0)
            ball.vel = rsim.Vec(0.0, float("inf"), 0.0)
            self.arenas.arenas[(injected["calls"] // 7) % self.num_arenas].ball.set_state(ball)
            injected["n"] += 1
        return real_step(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(RocketLeagueVecEnv, "step", step)
    run = tmp_path / "run"
    out = io.StringIO()
    # no milestone ratings: the final milestone's rating match steps its own env, whose NaN resets are not
    # the training env's (this test counts the training env's)
    code = train(
        tiny_config(4 * INTERVAL, "--set", "selfplay.rate_milestones=false"), run, console=Console(file=out, width=300)
    )
    assert code == 0, out.getvalue()
    records = metric_records(run)
    assert records[-1]["global_step"] == 4 * INTERVAL
    assert injected["n"] >= 10
    assert records[-1]["charts/nan_resets"] == injected["n"]  # every injected NaN was caught and counted
    for r in records:
        for key in ("losses/policy_loss", "losses/value_loss", "losses/entropy"):
            assert r[key] is not None and np.isfinite(r[key]), (key, r)
    for path in checkpoint_dirs(run):
        assert independently_good(path)
        ckpt = load_checkpoint(path)
        for tensors in (ckpt.model, ckpt.optimizer_tensors, ckpt.state_tensors):
            for name, tensor in tensors.items():
                assert not tensor.is_floating_point() or bool(tensor.isfinite().all()), name
