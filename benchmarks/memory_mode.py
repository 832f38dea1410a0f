"""RocketSim's two memory modes, LIGHT (speedflip's arenas) and HEAVY: the same games? how fast?

RocketSim builds an arena in one of two memory modes: HEAVY (its default: larger contact pools and a broadphase
grid of half the cell size) and LIGHT (what :class:`speedflip.env.arenas.Arenas` uses: about a third of the memory).
This script measures, for the docs (docs/performance.md, forty-fourth session):

1. whether the two modes play the same game: ``--games`` kickoffs, the ball sent off its spot towards blue's car,
   each played 60 s (450 decisions of 8 ticks) with the same seeded random controls in a LIGHT and a HEAVY arena,
   compared on RocketSim's exported state;
2. physics speed with cars driving: ``--arenas`` 1v1 arenas per mode, one thread, each round 150 decisions of 8 ticks
   per arena with random controls (a kickoff every 150 decisions), the modes alternated round by round. The first
   round of each mode is reported apart (``first_round``): a new HEAVY arena is slow on first use.

    python benchmarks/memory_mode.py --rounds 8 --json F
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import RocketSim as rsim

from speedflip.env.sim import init_rocketsim

MODES = {"LIGHT": rsim.MemoryWeightMode.LIGHT, "HEAVY": rsim.MemoryWeightMode.HEAVY}
TICK_SKIP = 8
ROUND_DECISIONS = 150


def _random_controls(rng: np.random.Generator) -> rsim.CarControls:
    return rsim.CarControls(
        throttle=float(rng.choice([-1.0, 0.0, 1.0])),
        steer=float(rng.choice([-1.0, 0.0, 1.0])),
        pitch=float(rng.choice([-1.0, 0.0, 1.0])),
        boost=bool(rng.random() < 0.3),
        jump=bool(rng.random() < 0.05),
    )


def _decide(arena: rsim.Arena, rng: np.random.Generator) -> None:
    """One decision: seeded random controls for every car, then TICK_SKIP ticks."""
    for car in arena.get_cars():
        car.set_controls(_random_controls(rng))
    arena.step(TICK_SKIP)


def _arena(mode: rsim.MemoryWeightMode, kickoff_seed: int) -> rsim.Arena:
    arena = rsim.Arena(rsim.GameMode.SOCCAR, memory_weight_mode=mode, tick_rate=120)
    arena.add_car(rsim.Team.BLUE)
    arena.add_car(rsim.Team.ORANGE)
    arena.reset_kickoff(kickoff_seed)
    return arena


def final_state(mode: rsim.MemoryWeightMode, seed: int, decisions: int = 450) -> list[np.ndarray]:
    """Kickoff ``seed`` in ``mode``, the ball sent off its spot towards blue's car, played ``decisions`` decisions of
    TICK_SKIP ticks with random controls drawn from ``seed``; the pads, ball and cars as RocketSim exports them."""
    arena = _arena(mode, seed)
    rng = np.random.default_rng(seed)
    ball = arena.ball.get_state()
    ball.vel = rsim.Vec(float(rng.uniform(-1500.0, 1500.0)), -2500.0, 800.0)  # towards blue: contacts
    arena.ball.set_state(ball)
    for _ in range(decisions):
        _decide(arena, rng)
    return [np.asarray(part, np.float64) for part in arena.get_gym_state()[1:]]


def same_games(games: int, decisions: int = 450) -> dict[str, float]:
    """Play ``games`` kickoffs in both modes with the same controls; the largest state difference at the end."""
    identical, worst = 0, 0.0
    for seed in range(games):
        light, heavy = (final_state(MODES[name], seed, decisions) for name in ("LIGHT", "HEAVY"))
        diff = max(float(np.max(np.abs(a - b))) for a, b in zip(light, heavy, strict=True))
        identical += diff == 0.0
        worst = max(worst, diff)
    return {"games": games, "identical": identical, "worst_abs_difference": worst}


def _round(arenas: list[rsim.Arena], rng: np.random.Generator) -> float:
    """One round: ROUND_DECISIONS decisions for every arena; arena ticks per second."""
    start = time.perf_counter()
    for step in range(ROUND_DECISIONS):
        for arena in arenas:
            _decide(arena, rng)
            if step == ROUND_DECISIONS - 1:
                arena.reset_kickoff(int(rng.integers(1_000_000)))
    return len(arenas) * ROUND_DECISIONS * TICK_SKIP / (time.perf_counter() - start)


def speed(num_arenas: int, rounds: int) -> dict[str, dict[str, object]]:
    """Arena ticks per second per mode, alternated round by round; the first round reported apart."""
    rng = np.random.default_rng(0)
    arenas = {name: [_arena(mode, k) for k in range(num_arenas)] for name, mode in MODES.items()}
    ticks: dict[str, list[float]] = {name: [] for name in MODES}
    for _ in range(rounds + 1):
        for name in MODES:
            ticks[name].append(_round(arenas[name], rng))
    return {
        name: {"first_round": values[0], "rounds": values[1:], "median": float(np.median(values[1:]))}
        for name, values in ticks.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=20, help="kickoffs played in both modes (same-state check)")
    parser.add_argument("--arenas", type=int, default=64, help="arenas per mode in the speed rounds")
    parser.add_argument("--rounds", type=int, default=8, help="speed rounds per mode after the first")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args()
    init_rocketsim()
    result = {"same_games": same_games(args.games), "arena_ticks_per_second": speed(args.arenas, args.rounds)}
    same = result["same_games"]
    print(f"same games: {same['identical']}/{same['games']} identical after 60 s, worst {same['worst_abs_difference']}")
    for name, row in result["arena_ticks_per_second"].items():
        rounds = ", ".join(f"{value:,.0f}" for value in row["rounds"])  # type: ignore[union-attr]
        first, median = row["first_round"], row["median"]
        print(f"{name}: first round {first:,.0f}, then {rounds} arena ticks/s (median {median:,.0f})")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
