"""Done conditions over arrays. Goals terminate an episode; time limits truncate it (bootstrapped)."""

from __future__ import annotations

import numpy as np


def goal_scored(goal_team: np.ndarray) -> np.ndarray:
    """``[K]`` bool: a goal was scored in the arena during the step (terminal)."""
    return goal_team >= 0


def timeout(episode_ticks: np.ndarray, timeout_ticks: int) -> np.ndarray:
    """``[K]`` bool: the episode reached its length limit (truncation, not a terminal state)."""
    return episode_ticks >= timeout_ticks


def no_touch_timeout(ticks_since_touch: np.ndarray, no_touch_ticks: int) -> np.ndarray:
    """``[K]`` bool: nobody touched the ball for too long (truncation, not a terminal state)."""
    return ticks_since_touch >= no_touch_ticks
