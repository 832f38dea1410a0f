"""The opponent pool: frozen snapshots (and the rule bot) that the learner plays against.

Sampling strategies (pure functions of the pool's ratings and ages, so they are testable):

- ``uniform``: every member equally likely;
- ``elo_weighted``: members within ``elo_window`` of the learner, weighted by
  ``exp(-|elo - learner_elo| / temperature)`` (close matches are the most informative);
- ``recent_weighted``: newer snapshots more likely, weight ``exp(age_rank / -temperature_ranks)``;
- ``difficulty_adjusted``: weight by how close the expected score against a member is to
  ``target_win_rate``: ``exp(-|expected - target| / (temperature / 400))``.

``selfplay.rule_share`` (optional) then fixes the rule bot's share of pool games, and
``selfplay.idle_share`` the idle car's (:func:`with_fixed_shares`): the Elo-weighted draw alone gave the
rule bot 1.5-2.6 % of them once the learner's milestones were in the pool, since they sit nearer the
learner's rating (docs/learning.md, ninth session).

Pruning drops members rated more than ``min_elo_diff`` below the learner (never the scripted members,
the rule bot and the idle car) and keeps at most ``pool_size`` snapshots (the oldest go first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from speedflip._types import Array
from speedflip.selfplay.elo import expected_score

STRATEGIES = ("uniform", "elo_weighted", "recent_weighted", "difficulty_adjusted")


@dataclass
class Member:
    """One pool entry: a milestone checkpoint path (``None`` for the scripted rule bot and idle car) and its rating."""

    name: str
    path: str | None
    step: int
    elo: float
    games: int = 0


def sampling_weights(
    strategy: str,
    member_elos: Sequence[float],
    member_steps: Sequence[int],
    learner_elo: float,
    temperature: float = 100.0,
    elo_window: float = 400.0,
    target_win_rate: float = 0.6,
) -> Array:
    """Normalised probabilities of picking each member."""
    n = len(member_elos)
    if n == 0:
        return np.zeros(0)
    elos = np.asarray(member_elos, np.float64)
    if strategy == "uniform":
        w = np.ones(n)
    elif strategy == "elo_weighted":
        gap = np.abs(elos - learner_elo)
        w = np.exp(-gap / max(temperature, 1e-6))
        if np.any(gap <= elo_window):
            w = np.where(gap <= elo_window, w, 0.0)
    elif strategy == "recent_weighted":
        order = np.argsort(np.argsort(-np.asarray(member_steps)))  # 0 = newest
        w = np.exp(-order / max(temperature / 100.0, 1e-6))
    elif strategy == "difficulty_adjusted":
        expected = np.array([expected_score(learner_elo, e) for e in elos])
        w = np.exp(-np.abs(expected - target_win_rate) / max(temperature / 400.0, 1e-6))
    else:
        raise ValueError(f"unknown sampling strategy '{strategy}'; choose one of {', '.join(STRATEGIES)}")
    total = w.sum()
    out: Array = w / total if total > 0 else np.full(n, 1.0 / n)
    return out


def with_fixed_shares(probs: Array, fixed_shares: Sequence[float | None]) -> Array:
    """``probs`` with every member whose entry of ``fixed_shares`` is a number held at that share of all
    pool games, and the others (``None``) scaled to the rest in proportion to their weights (evenly if
    their weights are all 0). Without a fixed member ``probs`` is returned unchanged; with only fixed
    members their shares are normalised to sum to 1."""
    fixed = np.array([share is not None for share in fixed_shares], bool)
    if not fixed.any():
        return probs
    shares = np.array([share if share is not None else 0.0 for share in fixed_shares], np.float64)
    if fixed.all():
        total_fixed = shares.sum()
        out_fixed: Array = shares / total_fixed if total_fixed > 0 else np.full(len(shares), 1.0 / len(shares))
        return out_fixed
    free_weights = np.where(fixed, 0.0, probs)
    total = free_weights.sum()
    if total <= 0:
        free_weights, total = (~fixed).astype(np.float64), float((~fixed).sum())
    out: Array = np.where(fixed, shares, max(1.0 - shares.sum(), 0.0) * free_weights / total)
    return out


def prune(members: list[Member], learner_elo: float, min_elo_diff: float, pool_size: int) -> list[Member]:
    """Drop members far below the learner and the oldest snapshots beyond ``pool_size`` (scripted
    members, ``path is None``, always stay)."""
    kept = [m for m in members if m.path is None or m.elo >= learner_elo - min_elo_diff]
    snapshots = sorted((m for m in kept if m.path is not None), key=lambda m: m.step)
    fixed = [m for m in kept if m.path is None]
    return fixed + snapshots[-pool_size:]
