"""Tiny Gymnasium envs with hand-checkable dynamics, and small configs for the gym tests."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from speedflip.config import Config, apply_overrides, build_config, load_preset


class CounterEnv(gym.Env[np.ndarray, np.int64]):
    """Observation ``[t]`` (steps since reset), reward ``reward`` every step, truncated after ``limit`` steps.

    With ``terminate_at`` set, the episode terminates (instead) once ``t`` reaches it.
    """

    def __init__(self, limit: int = 3, reward: float = 0.0, terminate_at: int | None = None) -> None:
        self.limit, self.reward, self.terminate_at = limit, reward, terminate_at
        self.observation_space = spaces.Box(0.0, 1000.0, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        terminated = self.terminate_at is not None and self.t >= self.terminate_at
        truncated = not terminated and self.t >= self.limit
        return np.array([float(self.t)], np.float32), self.reward, terminated, truncated, {}


def register_test_envs() -> None:
    """Register ``SfCounter-v0`` (truncates after 3 steps) and ``SfCounterTerm-v0`` (terminates after 2)."""
    if "SfCounter-v0" not in gym.registry:
        gym.register(id="SfCounter-v0", entry_point=CounterEnv)
    if "SfCounterTerm-v0" not in gym.registry:
        gym.register(id="SfCounterTerm-v0", entry_point=CounterEnv, kwargs={"limit": 10, "terminate_at": 2})


def gym_config(preset: str = "cartpole-ppo", *overrides: str) -> Config:
    """A preset with small, fast settings for tests (CPU, one thread, no TensorBoard) plus ``overrides``."""
    base = [
        "run.device=cpu",
        "run.torch_threads=1",
        "run.tensorboard=false",
        "gym.eval_episodes=4",
        "gym.eval_envs=2",
    ]
    return build_config(apply_overrides(load_preset(preset), [*base, *overrides]))
