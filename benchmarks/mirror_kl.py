"""How far a bot is from its own left-right mirror, on the states it meets in a match (a diagnostic, not a test).

Plays the match of ``speedflip eval A B --games N --game-seconds S --seed K [--stochastic]`` and, at every decision
of A, compares the policy ``p = pi(. | s)`` with its mirror ``q(a) = pi(mirror(a) | mirror(s))``
(:mod:`speedflip.env.mirror`: the field's ``x -> -x`` reflection; a mirror-symmetric bot has ``p = q``):

- ``kl``: the mean of ``KL(p || q)`` (nats);
- ``argmax_differs``: the share of decisions whose most likely row is not the mirror of the most likely row in the
  mirrored state (the exported bot would steer the other way in the mirror image of this state);
- ``tv``: the mean total variation ``0.5 * sum |p - q|``.

A bot trained with ``ppo.mirror_augment`` should be closer to its mirror than one trained without
(docs/learning.md, fifty-fourth session).

Usage::

    python benchmarks/mirror_kl.py /tmp/skill/H57-s9/seed9 rule --games 20 --game-seconds 60 --seed 0 [--json F]
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass

import numpy as np
import torch
from ball_zones import a_and_b_cars
from match_setup import match_parser, open_match, write_report

from speedflip._types import Array
from speedflip.env.arenas import GameArrays
from speedflip.env.mirror import env_mirror
from speedflip.rollout import Mirror
from speedflip.selfplay.match import play_match, summarize
from speedflip.selfplay.policies import NeuralPolicy


@dataclass(frozen=True)
class MirrorDistance:
    """A's distance from its mirror over its decisions (see the module docstring)."""

    decisions: int
    kl: float
    argmax_differs: float
    tv: float


def mirror_distance(logits: torch.Tensor, mirrored_logits: torch.Tensor, mirror: Mirror) -> MirrorDistance:
    """``logits`` of ``pi(. | s)`` and ``mirrored_logits`` of ``pi(. | mirror(s))``, both ``[N, A]``."""
    log_p = torch.log_softmax(logits, -1)
    index = torch.as_tensor(mirror.action_index)
    log_q = torch.log_softmax(mirrored_logits, -1)[:, index]  # q(a) = pi(mirror(a) | mirror(s))
    p = log_p.exp()
    kl = (p * (log_p - log_q)).sum(-1)
    differs = log_p.argmax(-1) != log_q.argmax(-1)
    tv = 0.5 * (p - log_q.exp()).abs().sum(-1)
    return MirrorDistance(int(logits.shape[0]), float(kl.mean()), float(differs.float().mean()), float(tv.mean()))


class MirrorRecorder:
    """A checkpoint that plays as ``speedflip eval`` plays it and keeps its logits in every state and its mirror."""

    def __init__(self, policy: NeuralPolicy, mirror: Mirror) -> None:
        self.policy = policy
        self.mirror = mirror
        self.name = policy.name
        self.table = policy.table
        self.logits: list[torch.Tensor] = []
        self.mirrored_logits: list[torch.Tensor] = []

    @torch.no_grad()
    def act(self, obs: Array, state: GameArrays, car_teams: Array) -> Array:
        logits = self.policy.logits(obs)
        self.logits.append(logits)
        self.mirrored_logits.append(self.policy.logits(self.mirror.obs(obs)))
        if self.policy.deterministic:
            best: Array = logits.argmax(-1).numpy()
            return best
        drawn: Array = torch.multinomial(torch.softmax(logits, -1), 1, generator=self.policy.generator)
        return np.asarray(drawn).squeeze(-1)

    def reset(self, rows: Array) -> None:
        self.policy.reset(rows)


def main(argv: list[str] | None = None) -> int:
    args = match_parser(__doc__).parse_args(argv)
    match = open_match(args, "mirror_kl.py")
    if match is None:
        return 2
    env, policy_a = match.env, match.policy_a
    if not isinstance(policy_a, NeuralPolicy):
        print(f"mirror_kl.py: '{args.a}' is not one checkpoint; give a run or a checkpoint", file=sys.stderr)
        env.close()
        return 2
    mirror = env_mirror(env.cfg, policy_a.table)
    recorder = MirrorRecorder(policy_a, mirror)
    try:
        results = play_match(env, recorder, match.policy_b, args.game_seconds)
    finally:
        env.close()
    summary = summarize(results)
    K, C = env.num_arenas, env.num_cars
    a_car, _ = a_and_b_cars(env.car_teams, np.array([r.a_is_blue for r in results]))

    def a_rows(per_step: list[torch.Tensor]) -> torch.Tensor:
        """A's rows only (every player is asked for every row): ``[T * K, A]``."""
        stacked = torch.stack(per_step).reshape(len(per_step), K, C, -1)
        return stacked[:, torch.arange(K), torch.as_tensor(a_car)].reshape(-1, stacked.shape[-1])

    distance = mirror_distance(a_rows(recorder.logits), a_rows(recorder.mirrored_logits), mirror)
    print(
        f"{policy_a.name} vs {match.policy_b.name}, {env.num_arenas} games of {args.game_seconds:g} s, {match.mode}: "
        f"{summary.wins} / {summary.draws} / {summary.losses}; over {distance.decisions} decisions of A: "
        f"KL(pi || its mirror) {distance.kl:.4f} nats, argmax differs {distance.argmax_differs:.3f}, "
        f"total variation {distance.tv:.3f}"
    )
    write_report(args, match, summary, {"mirror": asdict(distance)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
