"""Running mean/std (Welford/Chan parallel update) for observation and return normalisation."""

from __future__ import annotations

import numpy as np

from speedflip._types import Array


class RunningMeanStd:
    """Tracks the mean and variance of a stream of ``[batch, *shape]`` arrays."""

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4) -> None:
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = epsilon

    def update(self, batch: Array) -> None:
        batch = np.asarray(batch, np.float64)
        b_mean, b_var, b_count = batch.mean(axis=0), batch.var(axis=0), batch.shape[0]
        delta = b_mean - self.mean
        total = self.count + b_count
        self.mean = self.mean + delta * b_count / total
        m2 = self.var * self.count + b_var * b_count + delta**2 * self.count * b_count / total
        self.var = m2 / total
        self.count = total

    def normalize(self, x: Array, clip: float = 10.0) -> Array:
        out: Array = np.clip((x - self.mean) / np.sqrt(self.var + 1e-8), -clip, clip)
        return out.astype(np.float32)

    def state_dict(self) -> dict[str, Array]:
        return {"mean": self.mean.copy(), "var": self.var.copy(), "count": np.array(self.count)}

    def load_state_dict(self, state: dict[str, Array]) -> None:
        self.mean = np.asarray(state["mean"], np.float64).copy()
        self.var = np.asarray(state["var"], np.float64).copy()
        self.count = float(np.asarray(state["count"]).reshape(()))  # checkpoints store it as shape [1]


class ReturnNormalizer:
    """Scales rewards by the std of the running discounted return (return standardisation).

    ``returns_t = gamma * returns_{t-1} * (1 - done_{t-1}) + r_t``; rewards are divided by the
    std of that quantity, so the critic sees targets of a steady scale whatever the reward weights.
    """

    def __init__(self, num_agents: int, gamma: float) -> None:
        self.gamma = gamma
        self.returns = np.zeros(num_agents, np.float64)
        self.rms = RunningMeanStd(())

    def __call__(self, rewards: Array, dones: Array) -> Array:
        self.returns = self.returns * self.gamma + rewards
        self.rms.update(self.returns)
        self.returns[dones] = 0.0
        scaled: Array = rewards / np.sqrt(self.rms.var + 1e-8)
        return scaled.astype(np.float32)
