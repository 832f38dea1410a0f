"""The opponent pool: frozen snapshots (and the rule bot) that the learner plays against.

Sampling strategies (pure functions of the pool's ratings and ages, so they are testable):

- ``uniform``: every member equally likely;
- ``elo_weighted``: members within ``elo_window`` of the learner, weighted by
  ``exp(-|elo - learner_elo| / temperature)`` (close matches are the most informative);
- ``recent_weighted``: newer snapshots more likely, weight ``exp(age_rank / -temperature_ranks)``;
- ``difficulty_adjusted``: weight by how close the expected score against a member is to
  ``target_win_rate``: ``exp(-|expected - target| / (temperature / 400))``.

``selfplay.rule_share`` (optional) then fixes the rule bot's share of pool games (:func:`with_rule_share`):
the Elo-weighted draw alone gave the rule bot 1.5-2.6 % of them once the learner's milestones were in
the pool, since they sit nearer the learner's rating (docs/learning.md, ninth session).

Pruning drops members rated more than ``min_elo_diff`` below the learner (never the rule bot, the
fixed reference) and keeps at most ``pool_size`` snapshots (the oldest go first).
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
    """One pool entry: a milestone checkpoint path (or ``None`` for the rule bot) and its rating."""

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


def with_rule_share(probs: Array, is_rule: Sequence[bool], rule_share: float | None) -> Array:
    """``probs`` with the rule bot's members fixed at ``rule_share`` in all (split evenly among them)
    and the snapshots scaled to the rest in proportion to their weights; ``probs`` unchanged when
    ``rule_share`` is ``None`` or the pool lacks either kind of member."""
    rule = np.asarray(is_rule, bool)
    if rule_share is None or not rule.any() or rule.all():
        return probs
    snapshot_weights = np.where(rule, 0.0, probs)
    total = snapshot_weights.sum()
    if total <= 0:
        snapshot_weights, total = (~rule).astype(np.float64), float((~rule).sum())
    out: Array = np.where(rule, rule_share / rule.sum(), (1.0 - rule_share) * snapshot_weights / total)
    return out


def prune(members: list[Member], learner_elo: float, min_elo_diff: float, pool_size: int) -> list[Member]:
    """Drop members far below the learner and the oldest snapshots beyond ``pool_size``."""
    kept = [m for m in members if m.path is None or m.elo >= learner_elo - min_elo_diff]
    snapshots = sorted((m for m in kept if m.path is not None), key=lambda m: m.step)
    fixed = [m for m in kept if m.path is None]
    return fixed + snapshots[-pool_size:]
