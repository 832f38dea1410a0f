"""Head-to-head matches: N games in parallel arenas, sides swapped for fairness.

A game lasts ``game_seconds`` of simulated time from a kickoff, with a new kickoff after every goal;
the side with more goals wins. Games ``0 .. N/2-1`` put A on blue, the rest put A on orange.

Action tables: every player acts in the lookup table it was trained with (its ``table``; a
checkpoint's comes from the config stored with it, ``None`` means the match env's own table). A
match between players whose tables differ works: the env is built with one table
(:func:`match_env_config`'s ``action_table``, normally the first neural player's) and the indices of
a player with another table are decoded with *its own* table into raw controls (the env's
custom-controls path, exactly the same physics as a table row). Training against the opponent pool
cannot do that (collection steps by index only), so :class:`~speedflip.selfplay.matchmaker.Matchmaker`
refuses pool members with another table.

Decision cadence: a match env steps ``tick_skip`` physics ticks at a time, and by default every player decides
at every step. Given ``decision_ticks`` (:func:`play_match`), each side decides every so many ticks instead (a
multiple of the env's ``tick_skip``) and repeats its last action in between, deciding first at every kickoff as in
training. ``speedflip eval`` uses it so that a bot trained at another tick skip meets the scripted players at
their own cadence (:data:`SCRIPTED_TICK_SKIP`), with the env at the greatest common divisor of the two: the
scripted bots play differently at other cadences (docs/learning.md, sixty-ninth session).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from speedflip._types import Array
from speedflip.config import ActionTableConfig, EnvConfig
from speedflip.env import layout as L
from speedflip.env.action_forms import same_table
from speedflip.env.actions import NUM_CONTROLS, ActionError
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
    own_goals_a: int = 0  # of goals_b: goals A conceded off A's own last touch (see :func:`play_match`)
    own_goals_b: int = 0

    @property
    def score_a(self) -> float:
        return score_from_goals(self.goals_a, self.goals_b)

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "score_a": self.score_a}


@dataclass(frozen=True)
class OwnGoal:
    """Where one own goal came from: the conceding team's last touch before it.

    Positions are in the conceding team's frame (its own goal at -y; orange's are rotated 180 degrees
    about z), read at the start of the step in which the touch came (one decision, ``tick_skip`` ticks,
    before it): ``car_y > ball_y`` means the touching car came at the ball from upfield (further from
    its own goal), the position most own goals come from (docs/learning.md, seventeenth session).
    Times count from the kickoff that started the play.
    """

    game: int
    conceded_by_a: bool
    goal_seconds: float  # the goal, seconds after the kickoff
    touch_seconds: float  # the conceding team's last touch, seconds after the kickoff
    ball_x: float  # uu, before the touch
    ball_y: float
    car_x: float  # uu, the touching car before the touch
    car_y: float

    @property
    def car_upfield(self) -> bool:
        """The car was further from its own goal than the ball when it touched it last."""
        return self.car_y > self.ball_y

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "car_upfield": self.car_upfield}


@dataclass
class MatchSummary:
    """Totals over a match: wins/draws/losses of A with a 95% interval of A's score rate.

    ``scoreless_a`` / ``scoreless_b``: the games in which A / B scored no goal. A game is won by scoring within its
    time, so a player that outplays its opponent but scores slowly draws; these counts show it.

    ``distinct_games``: how many games differ in their record (side, goals, own goals, touches, shots, saves;
    :func:`game_record`). Deterministic players (the rule bot, the idle car, a neural policy playing its most
    likely action) on a handful of kickoff spots replay whole games; the interval assumes independent games,
    so it is too narrow when ``distinct_games`` is far below ``games``.
    """

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
    own_goals_a: int
    own_goals_b: int
    distinct_games: int
    scoreless_a: int
    scoreless_b: int


def game_record(result: GameResult) -> tuple[object, ...]:
    """What two replays of one game share: everything in its result but its index (two different games can
    share a record too, so counting records bounds the number of different games from below)."""
    fields = asdict(result)
    del fields["game"]
    return tuple(fields.values())


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
        own_goals_a=sum(r.own_goals_a for r in results),
        own_goals_b=sum(r.own_goals_b for r in results),
        distinct_games=len({game_record(r) for r in results}),
        scoreless_a=sum(r.goals_a == 0 for r in results),
        scoreless_b=sum(r.goals_b == 0 for r in results),
    )


# the ticks between decisions of the built-in scripted players (rule, idle, random) and of user bots in
# ``speedflip eval``: the cadence they were written and measured at (the presets' env.tick_skip)
SCRIPTED_TICK_SKIP = 8

# what a policy observes: two players in one match must agree on these
OBSERVATION_KEYS = ("obs_builder", "obs_team_size", "frame_stack", "nearest_pads", "shuffle_slots", "tick_skip")
# the env settings a trained policy plays with as in training: what it observes and the lookup table
# its action indices refer to (``env.action_table``). Callers pass ``env_cfg.model_dump(include=OBS_KEYS)``
# or a checkpoint's stored ``config["env"]`` filtered by it; the name is historical.
OBS_KEYS = (*OBSERVATION_KEYS, "action_table")


def match_env_config(
    games: int,
    team_size: int,
    game_seconds: float,
    tick_skip: int = 8,
    obs_team_size: int = 0,
    obs_options: Mapping[str, object] | None = None,
    action_table: ActionTableConfig | Mapping[str, Any] | None = None,
) -> EnvConfig:
    """Kickoff-only arenas for rated games; ``obs_options`` (the settings a checkpoint was trained with:
    builder, padding, frame stack, tick skip and its ``action_table``, see :data:`OBS_KEYS`) make its
    policy see what it saw in training and act with its table. ``action_table`` (optional) overrides
    the table of ``obs_options``; with neither the env uses the default table."""
    options = {k: v for k, v in (obs_options or {}).items() if k in OBS_KEYS}
    if action_table is not None:
        options["action_table"] = action_table
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


def player_table(player: Player) -> Array | None:
    """The lookup table a player's indices refer to (``None``: the env's own table, or a user bot)."""
    if isinstance(player, UserBotPolicy):
        return None
    table: Array | None = getattr(player, "table", None)
    return table


def step_inputs(
    env: RocketLeagueVecEnv, obs: Array, sides: Sequence[tuple[Player, Array]]
) -> tuple[Array, Array | None]:
    """``(action indices [N], custom controls [N, 8] or None)`` for one ``env.step`` of ``sides``: each
    ``(player, rows)`` drives the agents where ``rows`` (bool ``[N]``) is True.

    A player acting in the env's table gives indices; a user bot gives raw controls; a player with
    another table (see the module docstring) has its indices decoded with its own table into controls.
    """
    actions = np.zeros(env.num_agents, np.int64)
    custom: Array | None = None
    for player, rows in sides:
        controls: Array | None = None
        if isinstance(player, UserBotPolicy):
            controls = player.controls(env.state, env.car_teams, rows)
        else:
            chosen = np.asarray(player.act(obs, env.state, env.car_teams))
            table = player_table(player)
            if table is None or same_table(table, env.actions.table):
                actions[rows] = chosen[rows]
            else:
                picked = chosen[rows].astype(np.int64)
                if picked.size and (picked.min() < 0 or picked.max() >= table.shape[0]):
                    raise ActionError(
                        f"{player.name} chose action index {int(picked.max())} outside its own "
                        f"{table.shape[0]}-row lookup table"
                    )
                controls = np.zeros((env.num_agents, NUM_CONTROLS), np.float32)
                controls[rows] = table[picked]
        if controls is not None:
            if custom is None:
                custom = np.full((env.num_agents, NUM_CONTROLS), np.nan, np.float32)
            custom[rows] = np.asarray(controls, np.float32)[rows]
    return actions, custom


def reset_ended(ended: Array, *players: Player) -> None:
    """Recurrent players forget the agents whose episode ended (a goal reset the arena)."""
    rows = np.flatnonzero(ended)
    if rows.size:
        for player in players:
            if not isinstance(player, UserBotPolicy):
                player.reset(rows)


def play_match(
    env: RocketLeagueVecEnv,
    policy_a: Player,
    policy_b: Player | Sequence[Player],
    game_seconds: float = 120.0,
    own_goal_log: list[OwnGoal] | None = None,
    on_step: Callable[[Array, Array], None] | None = None,
    decision_ticks: tuple[int, int] | None = None,
) -> list[GameResult]:
    """Play one game per arena of ``env`` (built with :func:`match_env_config`); each player acts in its
    own lookup table (see the module docstring).

    ``policy_b`` is A's opponent in every game, or a sequence of one opponent per game (arena ``k``
    plays ``policy_b[k]``), so games against several opponents run side by side in one env.

    An **own goal** is a goal whose last touch (in the scoring step or before it, since the kickoff) came
    from the conceding team alone; a step in which both teams touched the ball counts for neither.
    Given ``own_goal_log``, one :class:`OwnGoal` per own goal is appended to it (in order of time).
    Given ``on_step``, it is called after every step with the car rows from before the step (a copy of
    ``env.state.cars``, ``[K, C, 2, 36]``) and the arenas a goal sent back to a kickoff in it (``[K]`` bool);
    ``env.state`` is then the state after the step (benchmarks/boost_play.py reads boost and speed so).
    Given ``decision_ticks`` = ``(A's, the opponents')``, physics ticks between a side's decisions (each a
    multiple of the env's ``tick_skip``), a side repeats its last action between its decisions and decides
    first at every kickoff (see the module docstring); ``None``: every player decides at every step.
    """
    K, C = env.num_arenas, env.num_cars
    opponents: list[Player] = list(policy_b) if isinstance(policy_b, Sequence) else [policy_b] * K
    if len(opponents) != K:
        raise ValueError(f"play_match got {len(opponents)} opponents for {K} games; give one per game (arena)")
    a_is_blue = np.arange(K) < math.ceil(K / 2)
    car_is_blue = env.car_teams == L.BLUE
    a_rows = (a_is_blue[:, None] == car_is_blue[None, :]).reshape(-1)  # [K*C]
    distinct = list({id(p): p for p in opponents}.values())
    sides: list[tuple[Player, Array]] = [(policy_a, a_rows)]
    for player in distinct:
        plays = np.repeat(np.array([o is player for o in opponents]), C)  # [K*C]: the arenas it plays in
        sides.append((player, ~a_rows & plays))
    goals_blue = np.zeros(K, np.int64)
    goals_orange = np.zeros(K, np.int64)
    touches = np.zeros((K, C), np.int64)
    own_goals = np.zeros((K, 2), np.int64)  # [K, team]: goals the team conceded off its own last touch
    steps_since_kickoff = np.zeros(K, np.int64)
    # each team's last touch since the kickoff: its step and [ball x, y, car x, y] before it, world frame
    team_touch_step = np.full((K, 2), -1, np.int64)
    team_touch = np.zeros((K, 2, 4), np.float64)
    obs = env.reset()
    start_stats = _car_stats(env)
    steps = math.ceil(game_seconds * L.TICK_RATE / env.cfg.tick_skip)
    step_seconds = env.cfg.tick_skip / L.TICK_RATE
    every = None if decision_ticks is None else _steps_between_decisions(decision_ticks, env.cfg.tick_skip, a_rows)
    held_actions = np.zeros(env.num_agents, np.int64)
    held_custom = np.full((env.num_agents, NUM_CONTROLS), np.nan, np.float32)
    for _ in range(steps):
        actions, custom = step_inputs(env, obs, sides)
        if every is not None:  # a side decides on the rows whose step since the kickoff is a multiple of its every
            deciding = np.repeat(steps_since_kickoff, C) % every == 0
            held_actions[deciding] = actions[deciding]
            held_custom[deciding] = np.nan if custom is None else custom[deciding]
            actions = held_actions.copy()
            custom = None if np.isnan(held_custom).all() else held_custom.copy()
        if own_goal_log is not None:  # where ball and cars are before the step (a goal resets the arena in it)
            ball_xy = env.arenas.state.ball[:, 0, L.BALL_POS][:, :2].copy()
            car_xy = env.arenas.state.cars[:, :, 0, L.CAR_POS][:, :, :2].copy()
        cars_before = env.state.cars.copy() if on_step is not None else None
        result = env.step(actions, custom)
        reset_ended(result.terminated | result.truncated, policy_a, *distinct)
        rewards = result.rewards.reshape(K, C)[:, 0]  # car 0 is blue: +1 blue goal, -1 orange goal
        goals_blue += (result.terminated.reshape(K, C)[:, 0] & (rewards > 0)).astype(np.int64)
        goals_orange += (result.terminated.reshape(K, C)[:, 0] & (rewards < 0)).astype(np.int64)
        goal_team, touched, last_touch = result.goal_team, result.touched, result.last_touch
        assert goal_team is not None and touched is not None and last_touch is not None  # the env reports them
        touches += touched
        touch_team = last_touch_team(last_touch, car_is_blue)  # the env's last touch, as the own_goal reward's
        steps_since_kickoff += 1
        if own_goal_log is not None:
            _record_team_touches(
                ball_xy, car_xy, touched, car_is_blue, steps_since_kickoff, team_touch_step, team_touch
            )
        own = (goal_team >= 0) & (touch_team == 1 - goal_team)  # last touched by the conceding team
        own_goals[own, 1 - goal_team[own]] += 1
        if own_goal_log is not None:
            for k in np.flatnonzero(own):
                team = 1 - int(goal_team[k])
                sign = 1.0 if team == L.BLUE else -1.0  # into the conceding team's frame
                ball_x, ball_y, car_x, car_y = team_touch[k, team]
                own_goal_log.append(
                    OwnGoal(
                        game=int(k),
                        conceded_by_a=bool(a_is_blue[k] == (team == L.BLUE)),
                        goal_seconds=float(steps_since_kickoff[k] * step_seconds),
                        touch_seconds=float(team_touch_step[k, team] * step_seconds),
                        ball_x=float(sign * ball_x),
                        ball_y=float(sign * ball_y),
                        car_x=float(sign * car_x),
                        car_y=float(sign * car_y),
                    )
                )
        ended_arenas = (result.terminated | result.truncated).reshape(K, C)[:, 0]
        if on_step is not None and cars_before is not None:
            on_step(cars_before, ended_arenas)
        steps_since_kickoff[ended_arenas] = 0
        team_touch_step[ended_arenas] = -1
        obs = result.obs
    stats = _car_stats(env) - start_stats  # [K, C, 2] shots, saves
    seconds = steps * env.cfg.tick_skip / L.TICK_RATE
    results = []
    for k in range(K):
        a_cars = car_is_blue if a_is_blue[k] else ~car_is_blue
        goals_a, goals_b = (goals_blue[k], goals_orange[k]) if a_is_blue[k] else (goals_orange[k], goals_blue[k])
        a_team, b_team = (L.BLUE, L.ORANGE) if a_is_blue[k] else (L.ORANGE, L.BLUE)
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
                own_goals_a=int(own_goals[k, a_team]),
                own_goals_b=int(own_goals[k, b_team]),
            )
        )
    return results


def _steps_between_decisions(decision_ticks: tuple[int, int], tick_skip: int, a_rows: Array) -> Array:
    """``[K * C]`` env steps between decisions of each agent's side (``a_rows``: player A's agents)."""
    bad = [ticks for ticks in decision_ticks if ticks < tick_skip or ticks % tick_skip]
    if bad:
        raise ValueError(
            f"decision_ticks {decision_ticks} must be multiples of the match env's tick_skip ({tick_skip}); build "
            f"the env at their greatest common divisor ({math.gcd(*decision_ticks)}) with match_env_config"
        )
    every: Array = np.where(a_rows, decision_ticks[0] // tick_skip, decision_ticks[1] // tick_skip)
    return every


def _record_team_touches(
    ball_xy: Array,
    car_xy: Array,
    touched: Array,
    car_is_blue: Array,
    steps_since_kickoff: Array,
    team_touch_step: Array,
    team_touch: Array,
) -> None:
    """Write each team's touch of this step into ``team_touch_step`` / ``team_touch`` (in place): the
    step since the kickoff and [ball x, y, touching car x, y] from before the step (``ball_xy`` ``[K, 2]``,
    ``car_xy`` ``[K, C, 2]``, world frame; the first touching car of a team when two touched at once)."""
    for team, on_team in ((L.BLUE, car_is_blue), (L.ORANGE, ~car_is_blue)):
        team_touched = touched & on_team[None, :]
        for k in np.flatnonzero(team_touched.any(axis=1)):
            car = int(np.flatnonzero(team_touched[k])[0])
            team_touch_step[k, team] = steps_since_kickoff[k]
            team_touch[k, team] = (*ball_xy[k], *car_xy[k, car])


def last_touch_team(last_touch: Array, car_is_blue: Array) -> Array:
    """The team whose cars made the ball's latest touch, per arena (``[K]``), from the environment's
    ``StepResult.last_touch`` (``[K, C]`` bool): -1 when nobody touched it since the kickoff or cars of
    both teams touched it in the same step (such a touch counts for neither team)."""
    blue = (last_touch & car_is_blue[None, :]).any(axis=1)
    orange = (last_touch & ~car_is_blue[None, :]).any(axis=1)
    out: Array = np.where(blue & orange, -1, np.where(blue, L.BLUE, np.where(orange, L.ORANGE, -1))).astype(np.int64)
    return out


def _car_stats(env: RocketLeagueVecEnv) -> Array:
    """``[K, C, 2]`` cumulative shots and saves per car (RocketSim's counters survive kickoffs)."""
    return np.array([[[car.shots, car.saves] for car in cars] for cars in env.arenas.cars], np.int64)
