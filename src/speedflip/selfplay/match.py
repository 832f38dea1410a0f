"""Head-to-head matches: N games in parallel arenas, sides swapped for fairness.

A game lasts ``game_seconds`` of simulated time from a kickoff, with a new kickoff after every goal;
the side with more goals wins. Games ``0 .. N/2-1`` put A on blue, the rest put A on orange.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from speedflip._types import Array
from speedflip.config import EnvConfig
from speedflip.env import layout as L
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.selfplay.elo import score_from_goals, win_rate_interval
from speedflip.selfplay.policies import Policy
from speedflip.selfplay.userbot import UserBotPolicy


@dataclass
class GameResult:
    """One game, from A's point of view."""

    game: int
    a_is_blue: bool
    goals_a: int
    goals_b: int
    touches_a: int
    touches_b: int
    shots_a: int
    shots_b: int
    saves_a: int
    saves_b: int
    seconds: float

    @property
    def score_a(self) -> float:
        return score_from_goals(self.goals_a, self.goals_b)

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "score_a": self.score_a}


@dataclass
class MatchSummary:
    """Totals over a match: wins/draws/losses of A with a 95% interval of A's score rate."""

    games: int
    wins: int
    draws: int
    losses: int
    score_rate: float
    interval_low: float
    interval_high: float
    goals_a: int
    goals_b: int
    touches_a: int
    touches_b: int
    shots_a: int
    shots_b: int
    saves_a: int
    saves_b: int


def summarize(results: list[GameResult]) -> MatchSummary:
    wins = sum(r.goals_a > r.goals_b for r in results)
    draws = sum(r.goals_a == r.goals_b for r in results)
    points = wins + 0.5 * draws
    low, high = win_rate_interval(points, len(results))
    return MatchSummary(
        games=len(results),
        wins=wins,
        draws=draws,
        losses=len(results) - wins - draws,
        score_rate=points / max(len(results), 1),
        interval_low=low,
        interval_high=high,
        goals_a=sum(r.goals_a for r in results),
        goals_b=sum(r.goals_b for r in results),
        touches_a=sum(r.touches_a for r in results),
        touches_b=sum(r.touches_b for r in results),
        shots_a=sum(r.shots_a for r in results),
        shots_b=sum(r.shots_b for r in results),
        saves_a=sum(r.saves_a for r in results),
        saves_b=sum(r.saves_b for r in results),
    )


OBS_KEYS = ("obs_builder", "obs_team_size", "frame_stack", "nearest_pads", "shuffle_slots", "tick_skip")


def match_env_config(
    games: int,
    team_size: int,
    game_seconds: float,
    tick_skip: int = 8,
    obs_team_size: int = 0,
    obs_options: dict[str, object] | None = None,
) -> EnvConfig:
    """Kickoff-only arenas for rated games; ``obs_options`` (the observation settings a checkpoint was
    trained with: builder, padding, frame stack, tick skip) make its policy see what it saw in training."""
    options = {k: v for k, v in (obs_options or {}).items() if k in OBS_KEYS}
    options.setdefault("tick_skip", tick_skip)
    options.setdefault("obs_team_size", obs_team_size)
    return EnvConfig(
        **options,
        num_arenas=games,
        blue_size=team_size,
        orange_size=team_size,
        timeout_seconds=game_seconds + 60.0,
        no_touch_timeout_seconds=game_seconds + 60.0,
        state_setters={"kickoff": 1.0},
        rewards={"goal": 1.0},
    )


Player = Policy | UserBotPolicy


def _decide(player: Player, obs: Array, env: RocketLeagueVecEnv, rows: Array) -> tuple[Array, Array | None]:
    """(action indices, custom controls or None) for the rows a player drives."""
    if isinstance(player, UserBotPolicy):
        return np.zeros(env.num_agents, np.int64), player.controls(env.state, env.car_teams, rows)
    return player.act(obs, env.state, env.car_teams), None


def reset_ended(ended: Array, *players: Player) -> None:
    """Recurrent players forget the agents whose episode ended (a goal reset the arena)."""
    rows = np.flatnonzero(ended)
    if rows.size:
        for player in players:
            if not isinstance(player, UserBotPolicy):
                player.reset(rows)


def play_match(
    env: RocketLeagueVecEnv, policy_a: Player, policy_b: Player, game_seconds: float = 120.0
) -> list[GameResult]:
    """Play one game per arena of ``env`` (built with :func:`match_env_config`)."""
    K, C = env.num_arenas, env.num_cars
    a_is_blue = np.arange(K) < math.ceil(K / 2)
    car_is_blue = env.car_teams == L.BLUE
    a_rows = (a_is_blue[:, None] == car_is_blue[None, :]).reshape(-1)  # [K*C]
    goals_blue = np.zeros(K, np.int64)
    goals_orange = np.zeros(K, np.int64)
    touches = np.zeros((K, C), np.int64)
    obs = env.reset()
    start_stats = _car_stats(env)
    steps = math.ceil(game_seconds * L.TICK_RATE / env.cfg.tick_skip)
    for _ in range(steps):
        actions_a, custom_a = _decide(policy_a, obs, env, a_rows)
        actions_b, custom_b = _decide(policy_b, obs, env, ~a_rows)
        actions = np.where(a_rows, actions_a, actions_b)
        custom = None
        if custom_a is not None or custom_b is not None:
            custom = np.full((env.num_agents, 8), np.nan, np.float32)
            if custom_a is not None:
                custom[a_rows] = custom_a[a_rows]
            if custom_b is not None:
                custom[~a_rows] = custom_b[~a_rows]
        result = env.step(actions, custom)
        reset_ended(result.terminated | result.truncated, policy_a, policy_b)
        rewards = result.rewards.reshape(K, C)[:, 0]  # car 0 is blue: +1 blue goal, -1 orange goal
        goals_blue += (result.terminated.reshape(K, C)[:, 0] & (rewards > 0)).astype(np.int64)
        goals_orange += (result.terminated.reshape(K, C)[:, 0] & (rewards < 0)).astype(np.int64)
        touches += env.state.cars[:, :, 0, L.CAR_HIT_LAST_STEP] > 0.5
        obs = result.obs
    stats = _car_stats(env) - start_stats  # [K, C, 2] shots, saves
    seconds = steps * env.cfg.tick_skip / L.TICK_RATE
    results = []
    for k in range(K):
        a_cars = car_is_blue if a_is_blue[k] else ~car_is_blue
        goals_a, goals_b = (goals_blue[k], goals_orange[k]) if a_is_blue[k] else (goals_orange[k], goals_blue[k])
        results.append(
            GameResult(
                game=k,
                a_is_blue=bool(a_is_blue[k]),
                goals_a=int(goals_a),
                goals_b=int(goals_b),
                touches_a=int(touches[k, a_cars].sum()),
                touches_b=int(touches[k, ~a_cars].sum()),
                shots_a=int(stats[k, a_cars, 0].sum()),
                shots_b=int(stats[k, ~a_cars, 0].sum()),
                saves_a=int(stats[k, a_cars, 1].sum()),
                saves_b=int(stats[k, ~a_cars, 1].sum()),
                seconds=seconds,
            )
        )
    return results


def _car_stats(env: RocketLeagueVecEnv) -> Array:
    """``[K, C, 2]`` cumulative shots and saves per car (RocketSim's counters survive kickoffs)."""
    return np.array([[[car.shots, car.saves] for car in cars] for cars in env.arenas.cars], np.int64)
