"""How a checkpoint plays when it samples from a sharpened policy: softmax(logits / T) for each T given.

T = 0 is the argmax (the exported bot, ``speedflip eval``'s default), T = 1 the policy as trained
(``speedflip eval --stochastic``). For each temperature the checkpoint plays the same match as
``speedflip eval CKPT OPPONENT --games N --game-seconds S --seed K`` (sides swapped halfway) and the
script prints one JSON line: wins / draws / losses, goals for and against, the share of decisions whose
sampled row is not the argmax, and how peaked the policy is (median probability of its top row, share
of decisions with less than 0.9 on it). It answers whether the gap between a bot's deterministic and
sampled results is a diffuse policy (a little sharpening closes it) or play that stray actions break.

    python benchmarks/sampling_temperature.py RUN@latest rule --temperatures 0 0.3 0.5 1
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from speedflip._types import Array
from speedflip.checkpoint import CheckpointError
from speedflip.env.arenas import GameArrays
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.selfplay.evaluate import resolve_player, training_obs_options
from speedflip.selfplay.match import match_env_config, play_match, summarize
from speedflip.selfplay.policies import NeuralPolicy


class TemperaturePlayer:
    """A checkpoint that samples from softmax(logits / temperature) (argmax at 0) and counts its decisions."""

    def __init__(self, policy: NeuralPolicy, temperature: float, seed: int) -> None:
        self.policy = policy
        self.temperature = temperature
        self.generator = torch.Generator().manual_seed(seed)
        self.table = policy.table
        self.name = policy.name
        self.top_probability: list[Array] = []
        self.off_argmax: list[Array] = []

    @torch.no_grad()
    def act(self, obs: Array, state: GameArrays, car_teams: Array) -> Array:
        logits = self.policy.logits(obs)
        best = logits.argmax(-1)
        if self.temperature == 0:
            chosen = best
        else:
            sharpened = torch.softmax(logits / self.temperature, -1)
            chosen = torch.multinomial(sharpened, 1, generator=self.generator).squeeze(-1)
        self.top_probability.append(torch.softmax(logits, -1).max(-1).values.numpy())
        self.off_argmax.append((chosen != best).numpy())
        out: Array = chosen.numpy()
        return out

    def reset(self, rows: Array) -> None:
        self.policy.reset(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="a run dir, RUN@latest, RUN@best or a checkpoint folder")
    parser.add_argument("opponent", help="rule, idle, random, a checkpoint or py:FILE:FUNC")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 0.3, 0.5, 0.7, 1.0])
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--game-seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0, help="match seed, as speedflip eval --seed")
    args = parser.parse_args()
    if any(t < 0 for t in args.temperatures):
        raise SystemExit("--temperatures: each must be >= 0 (0 plays the argmax)")

    try:
        for temperature in args.temperatures:
            play(args, temperature)
    except CheckpointError as err:
        raise SystemExit(f"sampling_temperature: {err}") from None


def play(args: argparse.Namespace, temperature: float) -> None:
    """One match at ``temperature``; prints its JSON line."""
    options = training_obs_options(args.checkpoint, args.opponent)
    match = match_env_config(args.games, 1, args.game_seconds, obs_options=options)
    env = RocketLeagueVecEnv(match, seed=args.seed)
    policy = resolve_player(args.checkpoint, env, args.seed, deterministic=False)
    if not isinstance(policy, NeuralPolicy):
        raise SystemExit(f"'{args.checkpoint}' is not a checkpoint; the temperature applies to a network's logits")
    player = TemperaturePlayer(policy, temperature, args.seed)
    opponent = resolve_player(args.opponent, env, args.seed + 1, deterministic=True)
    results = play_match(env, player, opponent, args.game_seconds)
    env.close()
    summary = summarize(results)
    top, off = np.concatenate(player.top_probability), np.concatenate(player.off_argmax)
    print(json.dumps({
        "checkpoint": player.name, "opponent": args.opponent, "temperature": temperature,
        "wins": summary.wins, "draws": summary.draws, "losses": summary.losses,
        "goals_for": summary.goals_a, "goals_against": summary.goals_b,
        "off_argmax": round(float(off.mean()), 4), "top_probability_median": round(float(np.median(top)), 4),
        "decisions_below_0.9": round(float((top < 0.9).mean()), 4),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
