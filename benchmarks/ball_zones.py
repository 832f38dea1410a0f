"""Where the ball is in the games a bot does not win (a diagnostic, not a test).

Plays ``--games`` games of ``--game-seconds`` between A and B with ``speedflip eval``'s own match loop (kickoffs,
a new kickoff after every goal, sides swapped halfway, the same env settings and seeds) and reports, for the games
A won and for the games it did not (draws and losses) separately, the share of steps the ball spent in each zone
of the field, seen from A (A attacks +y; the games A plays on orange are turned 180 degrees about z):

- ``own_third`` / ``middle_third`` / ``attack_third``: the ball's y in thirds of the field's length;
- ``side_wall``: within ``WALL_MARGIN`` uu of a side wall; ``attack_corner``: a side wall's margin in the
  attacking third;
- ``goal_mouth`` / ``beside_goal``: within ``BACK_ZONE`` uu of the attacked back wall, between the posts / outside
  them;
- ``air``: the ball's centre above ``AIR_HEIGHT`` uu;
- ``near_a`` / ``near_b``: the ball's centre within ``NEAR_CAR`` uu of A's / B's car (the ball held, or pinned
  against the opponent);

with the steps per game, A's touches per game and A's shots per game, and A's aim: its touches per game that leave
the ball heading between the posts (``on_target``: the ball's horizontal path, continued in a straight line, crosses
the attacked goal line inside them; ``speedflip.env.rewards.goal_line_x``) and those that leave it heading within
``NEAR_MISS`` uu outside them (``near_miss``). A bot that touches the ball a dozen times
in a game against the idle car without a shot (the thirty-third session) leaves the ball somewhere: this says
where.

Usage::

    python benchmarks/ball_zones.py /tmp/skill/P33-s3/seed3 idle --games 100 --game-seconds 60 --seed 0 \
        [--stochastic] [--json F]
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass

import numpy as np
from match_setup import match_parser, open_match, write_report

from speedflip.env import layout as L
from speedflip.env.rewards import GOAL_MOUTH_HALF_WIDTH, goal_line_x
from speedflip.selfplay.match import GameResult, play_match, summarize

WALL_MARGIN = 500.0  # uu from a side wall
AIR_HEIGHT = 300.0  # uu, the ball's centre (it rests at 93)
NEAR_CAR = 300.0  # uu, the ball's centre to a car's centre
NEAR_MISS = 500.0  # uu outside the posts where a touch sends the ball: a near miss
BACK_ZONE = 1000.0  # uu before the attacked back wall: the goal mouth (between the posts) or beside the goal
THIRD = 2.0 * L.BACK_WALL_Y / 3.0  # uu, one third of the field's length
ZONES = (
    "own_third", "middle_third", "attack_third", "side_wall", "attack_corner", "goal_mouth", "beside_goal", "air",
    "near_a", "near_b",
)  # fmt: skip


@dataclass(frozen=True)
class ZoneShares:
    """One group of games (A won them, or not): its share of steps in every zone (see the module docstring)."""

    group: str
    games: int
    steps_per_game: float
    touches_a_per_game: float
    shots_a_per_game: float
    on_target_a_per_game: float
    near_miss_a_per_game: float
    own_third: float
    middle_third: float
    attack_third: float
    side_wall: float
    attack_corner: float
    goal_mouth: float
    beside_goal: float
    air: float
    near_a: float
    near_b: float


def zone_masks(ball: np.ndarray, car_a: np.ndarray, car_b: np.ndarray) -> dict[str, np.ndarray]:
    """Boolean masks of the zones for positions in A's frame: ``ball``, ``car_a``, ``car_b`` are ``[..., 3]``."""
    x, y, z = ball[..., 0], ball[..., 1], ball[..., 2]
    wall = np.abs(x) > L.SIDE_WALL_X - WALL_MARGIN
    back = y > L.BACK_WALL_Y - BACK_ZONE
    return {
        "own_third": y < -L.BACK_WALL_Y + THIRD,
        "middle_third": (y >= -L.BACK_WALL_Y + THIRD) & (y <= L.BACK_WALL_Y - THIRD),
        "attack_third": y > L.BACK_WALL_Y - THIRD,
        "side_wall": wall,
        "attack_corner": wall & (y > L.BACK_WALL_Y - THIRD),
        "goal_mouth": back & (np.abs(x) <= L.GOAL_POST_X),
        "beside_goal": back & (np.abs(x) > L.GOAL_POST_X),
        "air": z > AIR_HEIGHT,
        "near_a": np.linalg.norm(ball - car_a, axis=-1) < NEAR_CAR,
        "near_b": np.linalg.norm(ball - car_b, axis=-1) < NEAR_CAR,
    }


def to_a_frame(pos: np.ndarray, a_is_blue: np.ndarray) -> np.ndarray:
    """Positions ``[T, K, 3]`` (world frame) in A's frame: arenas where A is orange turned 180 degrees about z."""
    sign = np.where(a_is_blue, 1.0, -1.0)[None, :]
    out = pos.copy()
    out[..., 0] *= sign
    out[..., 1] *= sign
    return out


def a_and_b_cars(car_teams: np.ndarray, a_is_blue: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The car index of A and of B in each arena (1v1), from the side play_match gave A there (``[K]`` bools)."""
    blue, orange = np.flatnonzero(car_teams == L.BLUE)[0], np.flatnonzero(car_teams != L.BLUE)[0]
    return np.where(a_is_blue, blue, orange), np.where(a_is_blue, orange, blue)


def aim_masks(ball_pos: np.ndarray, ball_vel: np.ndarray, touched: np.ndarray) -> dict[str, np.ndarray]:
    """``on_target`` / ``near_miss`` masks of A's touches (``touched``), the ball after them in A's frame."""
    with np.errstate(invalid="ignore"):
        miss = np.abs(goal_line_x(ball_pos, ball_vel)) - GOAL_MOUTH_HALF_WIDTH  # nan: not towards the goal line
        return {"on_target": touched & (miss <= 0.0), "near_miss": touched & (miss > 0.0) & (miss <= NEAR_MISS)}


def group_shares(
    group: str,
    games: list[GameResult],
    masks: dict[str, np.ndarray],
    columns: np.ndarray,
    steps: int,
    aim: dict[str, np.ndarray] | None = None,
) -> ZoneShares:
    """The zone shares over the games whose arenas are ``columns`` (masks ``[T, K]``), with A's aimed touches
    per game from ``aim`` (:func:`aim_masks`; none given: 0)."""
    n = len(games)

    def per_game(name: str) -> float:
        return float(aim[name][:, columns].sum()) / n if n and aim is not None else 0.0

    def share(name: str) -> float:
        return float(masks[name][:, columns].mean()) if n else 0.0

    return ZoneShares(
        group=group,
        games=n,
        steps_per_game=float(steps),
        touches_a_per_game=sum(g.touches_a for g in games) / n if n else 0.0,
        shots_a_per_game=sum(g.shots_a for g in games) / n if n else 0.0,
        on_target_a_per_game=per_game("on_target"),
        near_miss_a_per_game=per_game("near_miss"),
        **{name: share(name) for name in ZONES},
    )


def main(argv: list[str] | None = None) -> int:
    args = match_parser(__doc__).parse_args(argv)
    match = open_match(args, "ball_zones.py")
    if match is None:
        return 2
    env, policy_a, policy_b, mode = match.env, match.policy_a, match.policy_b, match.mode
    ball_log: list[np.ndarray] = []
    car_log: list[np.ndarray] = []
    vel_log: list[np.ndarray] = []
    hit_log: list[np.ndarray] = []

    def record(cars_before: np.ndarray, ended: np.ndarray) -> None:
        ball_log.append(env.state.ball[:, 0, L.BALL_POS].copy())
        car_log.append(env.state.cars[:, :, 0, L.CAR_POS].copy())
        vel_log.append(env.state.ball[:, 0, L.BALL_VEL].copy())
        hit_log.append(env.state.cars[:, :, 0, L.CAR_HIT_LAST_STEP] > 0)

    try:
        results = play_match(env, policy_a, policy_b, args.game_seconds, on_step=record)
    finally:
        env.close()
    summary = summarize(results)
    a_is_blue = np.array([r.a_is_blue for r in results])
    a_car, b_car = a_and_b_cars(env.car_teams, a_is_blue)
    ball, cars = np.stack(ball_log), np.stack(car_log)  # [T, K, 3], [T, K, C, 3]
    arenas = np.arange(env.num_arenas)
    masks = zone_masks(
        to_a_frame(ball, a_is_blue),
        to_a_frame(cars[:, arenas, a_car], a_is_blue),
        to_a_frame(cars[:, arenas, b_car], a_is_blue),
    )
    aim = aim_masks(
        to_a_frame(ball, a_is_blue), to_a_frame(np.stack(vel_log), a_is_blue), np.stack(hit_log)[:, arenas, a_car]
    )
    won = np.array([r.goals_a > r.goals_b for r in results])
    groups = [
        group_shares(
            "won", [r for r in results if r.goals_a > r.goals_b], masks, np.flatnonzero(won), len(ball_log), aim
        ),
        group_shares(
            "not won", [r for r in results if r.goals_a <= r.goals_b], masks, np.flatnonzero(~won), len(ball_log), aim
        ),
    ]
    print(
        f"{policy_a.name} vs {policy_b.name}, {env.num_arenas} games of {args.game_seconds:g} s, {mode}: "
        f"{summary.wins} / {summary.draws} / {summary.losses} ({summary.goals_a}:{summary.goals_b}); "
        "share of steps with the ball in each zone, seen from A"
    )
    header = "".join(f"{name:>14}" for name in ("games", "touches", "shots", "on_target", "near_miss", *ZONES))
    print(f"{'group':<9}{header}")
    for g in groups:
        values = [
            g.games, g.touches_a_per_game, g.shots_a_per_game, g.on_target_a_per_game, g.near_miss_a_per_game,
            *(getattr(g, name) for name in ZONES),
        ]  # fmt: skip
        print(f"{g.group:<9}" + "".join(f"{v:>14.2f}" if isinstance(v, float) else f"{v:>14}" for v in values))
    write_report(args, match, summary, {"groups": [asdict(g) for g in groups]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
