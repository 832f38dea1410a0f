"""How two players use boost and speed in the games ``speedflip eval`` plays (a diagnostic, not a test).

Plays ``--games`` games of ``--game-seconds`` between A and B with ``speedflip eval``'s own match loop (kickoffs,
a new kickoff after every goal, sides swapped halfway, the same env settings and seeds) and reports per side,
over every car-step of the games: the mean boost held (0..100), the share of steps with an empty tank
(< 1), boost picked up from pads and boost spent per minute of play, the mean speed (uu/s) and the share of
steps at supersonic speed (>= 2200 uu/s), with the games' wins / draws / losses for A.

Usage::

    python benchmarks/boost_play.py /tmp/skill/P32-s1/seed1 rule --games 100 --game-seconds 60 --seed 0 \
        [--stochastic] [--json F]
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass

import numpy as np
from match_setup import match_parser, open_match, write_report

from speedflip.env import layout as L
from speedflip.selfplay.match import play_match, summarize

SUPERSONIC_SPEED = 2200.0  # uu/s


@dataclass(frozen=True)
class BoostUse:
    """One side's boost and speed over every step of its cars (see the module docstring)."""

    side: str
    player: str
    mean_boost: float
    empty_share: float
    picked_up_per_minute: float
    spent_per_minute: float
    mean_speed: float
    supersonic_share: float


def side_usage(
    side: str, player: str, boost: np.ndarray, gained: np.ndarray, spent: np.ndarray, speed: np.ndarray, minutes: float
) -> BoostUse:
    """Summarise one side's per-step arrays (``boost``/``speed`` one value per car-step; ``gained``/``spent``
    summed over its cars; ``minutes`` of play per car summed over its cars)."""
    return BoostUse(
        side=side,
        player=player,
        mean_boost=float(boost.mean()),
        empty_share=float((boost < 1.0).mean()),
        picked_up_per_minute=float(gained.sum() / minutes),
        spent_per_minute=float(spent.sum() / minutes),
        mean_speed=float(speed.mean()),
        supersonic_share=float((speed >= SUPERSONIC_SPEED).mean()),
    )


def main(argv: list[str] | None = None) -> int:
    args = match_parser(__doc__).parse_args(argv)
    match = open_match(args, "boost_play.py")
    if match is None:
        return 2
    env, policy_a, policy_b, mode = match.env, match.policy_a, match.policy_b, match.mode
    boost_log: list[np.ndarray] = []
    speed_log: list[np.ndarray] = []
    delta_log: list[np.ndarray] = []

    def record(cars_before: np.ndarray, ended: np.ndarray) -> None:
        cars = env.state.cars[:, :, 0]
        after = cars[:, :, L.CAR_BOOST]
        boost_log.append(after.copy())
        speed_log.append(np.linalg.norm(cars[:, :, L.CAR_VEL], axis=-1))
        # a goal's kickoff reset is neither a pickup nor boost spent
        delta_log.append(np.where(ended[:, None], 0.0, after - cars_before[:, :, 0, L.CAR_BOOST]))

    try:
        results = play_match(env, policy_a, policy_b, args.game_seconds, on_step=record)
    finally:
        env.close()
    summary = summarize(results)
    a_is_blue = np.array([r.a_is_blue for r in results])
    a_cars = a_is_blue[:, None] == (env.car_teams == L.BLUE)[None, :]  # [K, C]
    boost, speed, delta = np.stack(boost_log), np.stack(speed_log), np.stack(delta_log)  # [T, K, C]
    gained, spent = np.maximum(delta, 0.0), np.maximum(-delta, 0.0)
    K = env.num_arenas
    minutes = args.game_seconds / 60.0 * K  # one car per side per game (1v1)
    usage = [
        side_usage(
            "A", policy_a.name, boost[:, a_cars], gained[:, a_cars], spent[:, a_cars], speed[:, a_cars], minutes
        ),
        side_usage(
            "B", policy_b.name, boost[:, ~a_cars], gained[:, ~a_cars], spent[:, ~a_cars], speed[:, ~a_cars], minutes
        ),
    ]
    print(
        f"{policy_a.name} vs {policy_b.name}, {K} games of {args.game_seconds:g} s, {mode}: "
        f"{summary.wins} / {summary.draws} / {summary.losses} ({summary.goals_a}:{summary.goals_b})"
    )
    print(f"{'side':<5}{'player':<28}{'boost':>7}{'empty':>7}{'pads/min':>10}{'spent/min':>11}{'speed':>8}{'super':>7}")
    for u in usage:
        print(
            f"{u.side:<5}{u.player[:27]:<28}{u.mean_boost:>7.1f}{u.empty_share:>7.2f}{u.picked_up_per_minute:>10.1f}"
            f"{u.spent_per_minute:>11.1f}{u.mean_speed:>8.0f}{u.supersonic_share:>7.2f}"
        )
    write_report(args, match, summary, {"sides": [asdict(u) for u in usage]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
