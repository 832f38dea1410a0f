"""Done conditions over arrays. Goals terminate an episode; time limits truncate it (bootstrapped)."""

from __future__ import annotations

from speedflip._types import Array


def goal_scored(goal_team: Array) -> Array:
    """``[K]`` bool: a goal was scored in the arena during the step (terminal)."""
    return goal_team >= 0


def timeout(episode_ticks: Array, timeout_ticks: int) -> Array:
    """``[K]`` bool: the episode reached its length limit (truncation, not a terminal state)."""
    return episode_ticks >= timeout_ticks


def no_touch_timeout(ticks_since_touch: Array, no_touch_ticks: int) -> Array:
    """``[K]`` bool: nobody touched the ball for too long (truncation, not a terminal state)."""
    return ticks_since_touch >= no_touch_ticks
