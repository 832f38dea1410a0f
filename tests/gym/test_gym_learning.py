"""Learning on CartPole-v1: PPO solves it (slow-marked, ~40 s on 2 cores); DQN clearly improves (~8 s)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from gym_helpers import gym_config

from speedflip.algos.dqn_learner import DQNLearner
from speedflip.cli import main
from speedflip.gym.evaluate import run_episodes
from speedflip.gym.run import GymSession

RANDOM_RETURN = 22.0  # a uniformly random CartPole policy


@pytest.mark.slow
@pytest.mark.ci
def test_ppo_solves_cartpole(tmp_path: Path) -> None:
    run, report = tmp_path / "cp", tmp_path / "eval.json"
    start = time.perf_counter()
    assert main(["train", "--preset", "cartpole-ppo", "--run-dir", str(run), "--set", "run.device=cpu"]) == 0
    assert main(["eval", str(run), "--episodes", "20", "--json", str(report)]) == 0
    seconds = time.perf_counter() - start
    result = json.loads(report.read_text())
    assert result["mean_return"] >= 475, result["verdict"]
    assert result["success_rate"] >= 0.9
    assert seconds < 180, f"took {seconds:.0f} s"


def test_dqn_clearly_improves_on_cartpole() -> None:
    cfg = gym_config("cartpole-dqn", "run.total_steps=10000", "run.seed=0")
    learner = GymSession(cfg)
    try:
        before = run_episodes("CartPole-v1", {}, learner.policy(), 10, 5, seed=7, deterministic=True)
        while learner.global_step < cfg.run.total_steps:
            learner.iterate()
        after = run_episodes("CartPole-v1", {}, learner.policy(), 10, 5, seed=7, deterministic=True)
    finally:
        learner.close()
    assert isinstance(learner.learner, DQNLearner) and learner.learner.gradient_steps_done > 1000
    assert np.mean(after.returns) >= 3 * RANDOM_RETURN > np.mean(before.returns)
