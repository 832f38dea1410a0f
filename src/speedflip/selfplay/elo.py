"""Elo ratings as pure functions.

``expected_score(a, b) = 1 / (1 + 10 ** ((b - a) / 400))``; after a game with score ``s`` for A
(1 win, 0.5 draw, 0 loss) A's rating moves by ``k * (s - expected)`` and B's by the opposite.
"""

from __future__ import annotations

import math

INITIAL_RATING = 1000.0
DEFAULT_K = 32.0


def expected_score(rating_a: float, rating_b: float) -> float:
    """Probability-like expected score of A against B."""
    return float(1.0 / (1.0 + 10.0 ** ((rating_b - rating_a) / 400.0)))


def update(rating_a: float, rating_b: float, score_a: float, k: float = DEFAULT_K) -> tuple[float, float]:
    """New ``(rating_a, rating_b)`` after one game in which A scored ``score_a`` (1, 0.5 or 0)."""
    if not 0.0 <= score_a <= 1.0:
        raise ValueError(f"score_a must lie in [0, 1] (1 win, 0.5 draw, 0 loss), got {score_a}")
    delta = k * (score_a - expected_score(rating_a, rating_b))
    return rating_a + delta, rating_b - delta


def update_many(rating_a: float, rating_b: float, scores_a: list[float], k: float = DEFAULT_K) -> tuple[float, float]:
    """Apply :func:`update` game by game, in order."""
    for score in scores_a:
        rating_a, rating_b = update(rating_a, rating_b, score, k)
    return rating_a, rating_b


def score_from_goals(goals_a: int, goals_b: int) -> float:
    """1 for a win, 0.5 for a draw, 0 for a loss."""
    return 1.0 if goals_a > goals_b else 0.5 if goals_a == goals_b else 0.0


def win_rate_interval(wins: float, games: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a win rate (draws count as half a win); ``(low, high)``."""
    if games <= 0:
        return 0.0, 1.0
    p = wins / games
    denom = 1.0 + z * z / games
    centre = (p + z * z / (2 * games)) / denom
    half = z * math.sqrt(p * (1 - p) / games + z * z / (4 * games * games)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
