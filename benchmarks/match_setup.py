"""What the match diagnostics (``boost_play.py``, ``ball_zones.py``) share: their command line and the match they
play - ``speedflip eval``'s env settings, seeds and players for A against B."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass

from speedflip.checkpoint import CheckpointError
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.selfplay.evaluate import resolve_player, training_obs_options
from speedflip.selfplay.match import MatchSummary, Player, match_env_config


@dataclass
class Match:
    """The env of ``games`` kickoff arenas and the two players, as ``speedflip eval`` builds them."""

    env: RocketLeagueVecEnv
    policy_a: Player
    policy_b: Player
    mode: str  # "deterministic" (as exported) or "sampled"


def match_parser(doc: str | None) -> argparse.ArgumentParser:
    """``A B --games --game-seconds --seed --stochastic --json``, the diagnostics' common arguments."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", help="player A: a run dir, checkpoint or built-in name")
    parser.add_argument("b", help="player B")
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--game-seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stochastic", action="store_true", help="sample actions (default: as exported, argmax)")
    parser.add_argument("--json", default=None)
    return parser


def open_match(args: argparse.Namespace, script: str) -> Match | None:
    """The match of ``args`` (see :func:`match_parser`); ``None`` after one line on stderr naming the problem
    when a player's checkpoint cannot be read (a missing run, a broken checkpoint)."""
    try:
        options = training_obs_options(args.a, args.b)
    except CheckpointError as err:
        print(f"{script}: {err}", file=sys.stderr)
        return None
    env = RocketLeagueVecEnv(match_env_config(args.games, 1, args.game_seconds, obs_options=options), seed=args.seed)
    deterministic = not args.stochastic
    policy_a = resolve_player(args.a, env, args.seed, deterministic)
    policy_b = resolve_player(args.b, env, args.seed + 1, deterministic)
    return Match(env, policy_a, policy_b, "sampled" if args.stochastic else "deterministic")


def write_report(args: argparse.Namespace, match: Match, summary: MatchSummary, rows: dict[str, object]) -> None:
    """Write ``--json`` (when given): the match (players, games, seed, mode), A's results and the script's ``rows``."""
    if not args.json:
        return
    payload = {
        "a": args.a,
        "b": args.b,
        "games": match.env.num_arenas,
        "game_seconds": args.game_seconds,
        "seed": args.seed,
        "action_mode": match.mode,
        "wins": summary.wins,
        "draws": summary.draws,
        "losses": summary.losses,
        "goals_a": summary.goals_a,
        "goals_b": summary.goals_b,
        **rows,
    }
    with open(args.json, "w") as f:
        json.dump(payload, f, indent=2)
