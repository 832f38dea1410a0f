"""Milestone ratings: every new milestone plays a few short games against fixed anchors and gets a
maximum-a-posteriori performance rating, so Elo over agent steps is a real curve.

Opponents: the rule bot and the idle car (the fixed references of :data:`~speedflip.selfplay.league.FIXED_RATINGS`)
and up to ``selfplay.rating_opponents`` earlier rated milestones, 1, 2, 4, ... milestones back. Their
ratings do not move in these games (they are anchors). The milestone plays as the exported bot plays
(its most likely action); all games run side by side in one match env of ``selfplay.rating_game_seconds``
games, arena ``k`` against opponent ``k mod n``, sides swapped halfway.

The milestone's rating ``R`` maximizes the Elo log-likelihood of its scores plus a Gaussian prior::

    sum_j [s_j log E_j + (1 - s_j) log(1 - E_j)] - (R - mu)^2 / (2 sd^2),   E_j = 1 / (1 + 10^((r_j - R) / 400))

with ``s_j`` the score of game ``j`` (1 win, 0.5 draw, 0 loss), ``r_j`` the opponent's rating, ``mu``
the previous rated milestone's rating (for the first, the idle car's 470: an untrained policy plays about
as well as a car that does nothing) and ``sd = selfplay.rating_prior_sd``. The objective is concave, so
the maximum is unique; Newton's method finds it. The prior keeps the rating finite when every game is
won or lost and pulls a rating from few games towards the last one. (A first prior at the rule bot's
1000 rated untrained first milestones above later, better ones, and made them the shipped bot.)
games.csv gets one row per game with the rating from the games so far, so a rebuilt league is exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from speedflip._types import Array
from speedflip.checkpoint import CheckpointError
from speedflip.config import EnvConfig, SelfPlayConfig
from speedflip.env.action_forms import table_from_spec
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.selfplay import elo
from speedflip.selfplay.league import (
    FIXED_RATINGS,
    IDLE_PLAYER,
    IDLE_RATING,
    REFERENCE_PLAYER,
    League,
    Player,
    append_games,
)
from speedflip.selfplay.match import OBS_KEYS, GameResult, match_env_config, play_match
from speedflip.selfplay.policies import NeuralPolicy, Policy, ScriptedPolicy, checkpoint_meta, idle_policy
from speedflip.selfplay.rule_policy import RulePolicy

ELO_SLOPE = math.log(10.0) / 400.0  # d log-odds / d Elo


class RatingError(RuntimeError):
    """A milestone that cannot be rated here; the message says why (training goes on)."""


def performance_rating(
    scores: Sequence[float],
    opponent_ratings: Sequence[float],
    prior_mean: float = elo.INITIAL_RATING,
    prior_sd: float | None = 300.0,
    tolerance: float = 1e-9,
) -> float:
    """The rating ``R`` that maximizes the Elo log-likelihood of ``scores`` against opponents of fixed
    ``opponent_ratings`` plus a Gaussian prior ``N(prior_mean, prior_sd)`` (see the module docstring).

    ``prior_sd=None`` is a flat prior (the maximum-likelihood rating), defined only when the games hold
    both points won and points lost. Against a single opponent rating ``r`` it is
    ``r + 400 * log10(s / (1 - s))`` for a score rate ``s``.
    """
    s = np.asarray(scores, np.float64)
    r = np.asarray(opponent_ratings, np.float64)
    if s.shape != r.shape or s.ndim != 1:
        raise ValueError(f"one opponent rating per score: got {s.size} scores and {r.size} ratings")
    if np.any((s < 0.0) | (s > 1.0)):
        raise ValueError(f"scores must lie in [0, 1] (1 win, 0.5 draw, 0 loss), got {s.tolist()}")
    if prior_sd is None:
        if s.size == 0 or s.sum() == 0.0 or s.sum() == s.size:
            raise ValueError(
                "with a flat prior (prior_sd=None) the rating is unbounded unless the games hold both points "
                f"won and points lost (scores {s.tolist()}); give a prior_sd"
            )
        precision, rating = 0.0, float(r.mean())
    elif prior_sd > 0:
        precision, rating = 1.0 / prior_sd**2, float(prior_mean)
    else:
        raise ValueError(f"prior_sd must be > 0 Elo (or None for a flat prior), got {prior_sd}")

    def objective(x: float) -> float:
        # log E = -log(1 + e^{-z}), log(1 - E) = -log(1 + e^{z}) with z = (x - r) * slope
        z = (x - r) * ELO_SLOPE
        loglik = -(s * np.logaddexp(0.0, -z) + (1.0 - s) * np.logaddexp(0.0, z)).sum()
        return float(loglik) - 0.5 * precision * (x - prior_mean) ** 2

    for _ in range(200):
        expected = 1.0 / (1.0 + np.exp(-(rating - r) * ELO_SLOPE))
        gradient = ELO_SLOPE * float((s - expected).sum()) - precision * (rating - prior_mean)
        curvature = ELO_SLOPE**2 * float((expected * (1.0 - expected)).sum()) + precision
        step = float(np.clip(gradient / curvature, -1000.0, 1000.0))
        before = objective(rating)
        while objective(rating + step) < before and abs(step) > tolerance:  # backtrack: never go downhill
            step /= 2.0
        rating += step
        if abs(step) <= tolerance:
            return rating
    raise RuntimeError(f"the performance rating did not converge (scores {s.tolist()}, opponents {r.tolist()})")


def earlier_milestones(league: League, step: int, count: int) -> list[Player]:
    """Up to ``count`` rated milestones made before ``step``: 1, 2, 4, ... milestones back (newest first)."""
    rated = sorted(
        (p for p in league.players.values() if p.is_milestone and p.step is not None and p.step < step and p.games),
        key=lambda p: p.step or 0,
    )
    picked: list[Player] = []
    back = 1
    while len(picked) < count and back <= len(rated):
        picked.append(rated[-back])
        back *= 2
    return picked


@dataclass
class MilestoneRating:
    """The outcome of :func:`rate_milestone`."""

    name: str
    rating: float
    prior_mean: float
    points: dict[str, float] = field(default_factory=dict)  # opponent -> points scored by the milestone
    games: dict[str, int] = field(default_factory=dict)  # opponent -> games played
    notes: list[str] = field(default_factory=list)

    def anchor_score(self) -> float | None:
        """The milestone's score rate (win 1, draw 0.5) in its games against the fixed anchors, the rule bot
        and the idle car (``None``: it played neither)."""
        anchors = [name for name in self.games if name in FIXED_RATINGS]
        games = sum(self.games[name] for name in anchors)
        return sum(self.points[name] for name in anchors) / games if games else None

    def describe(self) -> str:
        """``main@2000000: 1187 Elo (prior 1120; vs rule 3.5/4, idle 4/4, main@1000000 2/4)``."""
        scores = ", ".join(f"{name} {self.points[name]:g}/{self.games[name]}" for name in self.games)
        return f"{self.name}: {self.rating:.0f} Elo (prior {self.prior_mean:.0f}; vs {scores})"


def rating_unavailable(env: EnvConfig) -> str | None:
    """Why milestones of a run with these env settings cannot be rated here (``None``: they can)."""
    if env.rlgym is not None:
        return "env.rlgym: the match arenas build speedflip observations, not the adapter's"
    if env.action_form != "table":
        return f"env.action_form={env.action_form}: matches play lookup-table policies only"
    return None


def rate_milestone(
    path: Path,
    league: League,
    env: EnvConfig,
    sp: SelfPlayConfig,
    seed: int,
    games_log: Path | None = None,
    train_minutes: float | None = None,
) -> MilestoneRating:
    """Rate the milestone at ``path`` (``milestones/<stage>/<step>/``) into ``league`` (see the module
    docstring). ``env``: the run's env settings now (team size, observation settings, lookup table).
    With ``games_log`` the games are appended there and the league is saved.

    Raises :class:`RatingError` when it cannot be rated (action form, observation size).
    """
    step, obs_dim = _milestone_shape(path, env)
    name = f"{path.parent.name}@{step}"
    earlier = earlier_milestones(league, step, sp.rating_opponents)
    prior_mean = earlier[0].rating if earlier else IDLE_RATING

    table = table_from_spec(env.action_table)  # the match env's table (built from the same setting)
    opponents, notes = _anchors(table)
    for before in earlier:
        try:
            opponents.append((before.name, _milestone_policy(Path(str(before.path)), obs_dim, table, seed)))
        except CheckpointError as err:
            notes.append(f"{before.name} was left out ({err})")
    team = max(1, env.blue_size)
    played = _play(path, obs_dim, env, opponents, sp.rating_games, sp.rating_game_seconds, seed)

    player = league.player(name, step=step, path=str(path), train_minutes=train_minutes)
    out = MilestoneRating(name, player.rating, prior_mean, notes=notes)
    scores: list[float] = []
    anchors: list[float] = []
    rows = []
    for opponent, result in played:
        scores.append(result.score_a)
        anchors.append(league.player(opponent).rating)
        rating = performance_rating(scores, anchors, prior_mean, sp.rating_prior_sd)
        rating_a, rating_b = league.record_rated(name, opponent, rating)
        rows.append({**result.as_dict(), "step": step, "player_a": name, "player_b": opponent,
                     "team_size": team, "rating_a": rating_a, "rating_b": rating_b})  # fmt: skip
        out.points[opponent] = out.points.get(opponent, 0.0) + result.score_a
        out.games[opponent] = out.games.get(opponent, 0) + 1
    out.rating = league.player(name).rating
    if games_log is not None:
        league.save()
        append_games(games_log, rows)
    return out


def anchor_games(
    path: Path, env: EnvConfig, games_per_opponent: int, game_seconds: float, seed: int
) -> tuple[dict[str, float], dict[str, int]]:
    """The milestone at ``path`` against the anchors alone (the rule bot and the idle car), as the exported bot
    plays: its points and games per anchor, ``games_per_opponent`` games of ``game_seconds`` each (half per
    side), nothing recorded. Raises :class:`RatingError` when it cannot play here."""
    _step, obs_dim = _milestone_shape(path, env)
    opponents, _notes = _anchors(table_from_spec(env.action_table))
    points: dict[str, float] = {}
    games: dict[str, int] = {}
    for opponent, result in _play(path, obs_dim, env, opponents, games_per_opponent, game_seconds, seed):
        points[opponent] = points.get(opponent, 0.0) + result.score_a
        games[opponent] = games.get(opponent, 0) + 1
    return points, games


def idle_own_goals(path: Path, env: EnvConfig, games: int, game_seconds: float, seed: int) -> tuple[int, float]:
    """The milestone at ``path`` against the idle car alone, as the exported bot plays: ``(own goals, points)``
    over ``games`` games of ``game_seconds`` (half per side), nothing recorded. An own goal is a goal the milestone
    conceded off its own last touch; against a car that never moves every goal conceded is one. Raises
    :class:`RatingError` when it cannot play here or the action table has no idle (all-zero) row."""
    _step, obs_dim = _milestone_shape(path, env)
    try:
        idle = idle_policy(table_from_spec(env.action_table))
    except ValueError as err:
        raise RatingError(f"no idle car to play against ({err})") from err
    results = [result for _name, result in _play(path, obs_dim, env, [(IDLE_PLAYER, idle)], games, game_seconds, seed)]
    return sum(r.own_goals_a for r in results), float(sum(r.score_a for r in results))


def _milestone_shape(path: Path, env: EnvConfig) -> tuple[int, int]:
    """``(global_step, obs_dim)`` of the milestone at ``path``; :class:`RatingError` when it cannot be rated."""
    reason = rating_unavailable(env)
    if reason is not None:
        raise RatingError(reason)
    meta = checkpoint_meta(path)
    step, compat = meta.get("global_step"), meta.get("compat")
    obs_dim = compat.get("obs_dim") if isinstance(compat, dict) else None
    if not isinstance(step, int) or not isinstance(obs_dim, int):
        raise RatingError(f"'{path / 'meta.json'}' lacks global_step or compat.obs_dim (not a speedflip milestone)")
    return step, obs_dim


def _anchors(table: Array) -> tuple[list[tuple[str, Policy]], list[str]]:
    """The fixed anchors that can play ``table`` (the rule bot; the idle car when the table has an all-zero row)
    and notes on any left out."""
    opponents: list[tuple[str, Policy]] = [(REFERENCE_PLAYER, ScriptedPolicy(RulePolicy.for_table(table)))]
    notes: list[str] = []
    try:
        opponents.append((IDLE_PLAYER, idle_policy(table)))
    except ValueError:
        notes.append("the action table has no all-zero row: the idle car was left out")
    return opponents, notes


def _play(
    path: Path,
    obs_dim: int,
    env: EnvConfig,
    opponents: list[tuple[str, Policy]],
    games_per_opponent: int,
    game_seconds: float,
    seed: int,
) -> list[tuple[str, GameResult]]:
    """The milestone's games against every opponent side by side in one match env (arena ``k`` against opponent
    ``k mod n``, sides swapped halfway): ``(opponent name, result)`` per game, in arena order."""
    team = max(1, env.blue_size)
    pad = max(env.obs_team_size, env.blue_size, env.orange_size)
    options = {**env.model_dump(include=set(OBS_KEYS)), "obs_team_size": pad}
    games = games_per_opponent * len(opponents)
    match = RocketLeagueVecEnv(match_env_config(games, team, game_seconds, obs_options=options), seed=seed)
    try:
        if match.obs_dim != obs_dim:
            raise RatingError(
                f"the milestone observes {obs_dim} numbers but a {team}v{team} match gives {match.obs_dim}"
            )
        milestone = _milestone_policy(path, obs_dim, match.actions.table, seed)
        per_game = [opponents[k % len(opponents)] for k in range(games)]  # each opponent G/2 games per side
        results = play_match(match, milestone, [policy for _, policy in per_game], game_seconds)
    finally:
        match.close()
    return [(name, result) for (name, _), result in zip(per_game, results, strict=True)]


def _milestone_policy(path: Path, obs_dim: int, table: Array, seed: int) -> NeuralPolicy:
    """A milestone as the exported bot plays: its most likely action, in the run's lookup table."""
    return NeuralPolicy(path, obs_dim, deterministic=True, seed=seed, table=table)
