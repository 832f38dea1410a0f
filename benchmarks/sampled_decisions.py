"""Where a bot decides, how sure it is there and what its training reward pays it there (a diagnostic, not a test).

Plays the match of ``speedflip eval A B --games N --game-seconds S --seed K [--stochastic]`` (the same games: A's
draws come from the generator ``speedflip eval`` seeds) and sorts every decision of A by where the ball was when A
made it, seen from A (A attacks +y): ``own_third``, ``middle_third``, the ``attack_third`` outside the zones that
follow, ``goal_mouth`` (within 1000 uu of the attacked back wall, between the posts) and ``beside_goal`` (the same,
outside them), as ``ball_zones.py`` draws them. For the games A won and those it did not, per zone:

- ``share``: the share of the group's decisions made with the ball there;
- ``off_argmax``: the share of them whose played row is not the network's most likely one (0 as exported);
- ``p_argmax``: the mean probability of the most likely row; ``entropy``: the policy's mean entropy (nats);
- ``reward_per_second``: what A's training reward (the checkpoint's own ``env.rewards``, the goal term left out)
  paid A per second of game in that zone, in total and per component (steps in which a goal reset the arena are
  left out: the state after them is a kickoff).

It answers two questions about the sampled bot's unwon games against an empty net (docs/learning.md, forty-first
session: the ball beside the goal a third of the time, no shot): is the policy unsure there (high entropy, many
decisions off its argmax: states training rarely reached), and does the reward pay it as well there as where it
scores (a loop the return prefers to a goal)?

Usage::

    python benchmarks/sampled_decisions.py /tmp/skill/C42-s9/seed9 idle --games 100 --game-seconds 60 --seed 0 \
        --stochastic [--json F]
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from ball_zones import BACK_ZONE, THIRD, a_and_b_cars, to_a_frame
from match_setup import match_parser, open_match, write_report

from speedflip._types import Array
from speedflip.checkpoint import verify_checkpoint
from speedflip.env import layout as L
from speedflip.env.arenas import GameArrays
from speedflip.env.rewards import REWARD_COMPONENTS, RewardContext
from speedflip.selfplay.match import play_match, summarize
from speedflip.selfplay.policies import NeuralPolicy, find_checkpoint

DECISION_ZONES = ("own_third", "middle_third", "attack_third", "goal_mouth", "beside_goal")


def decision_zone(ball: Array) -> Array:
    """The index in :data:`DECISION_ZONES` of ball positions ``[..., 3]`` in A's frame (one zone each)."""
    x, y = ball[..., 0], ball[..., 1]
    back = y > L.BACK_WALL_Y - BACK_ZONE
    zone = np.where(y < -L.BACK_WALL_Y + THIRD, 0, np.where(y <= L.BACK_WALL_Y - THIRD, 1, 2))
    zone = np.where(back & (np.abs(x) <= L.GOAL_POST_X), 3, zone)
    out: Array = np.where(back & (np.abs(x) > L.GOAL_POST_X), 4, zone)
    return out


class DecisionRecorder:
    """A checkpoint that plays as ``speedflip eval`` plays it (argmax, or a draw from its own seeded generator)
    and keeps, for every row and decision, how sure the network was and whether the played row is the argmax."""

    def __init__(self, policy: NeuralPolicy) -> None:
        self.policy = policy
        self.table = policy.table
        self.name = policy.name
        self.p_argmax: list[Array] = []  # per decision: [N]
        self.entropy: list[Array] = []
        self.off_argmax: list[Array] = []
        self.ball: list[Array] = []  # the ball (world frame) when the decision was made: [K, 3]
        self.state_before: GameArrays | None = None  # the state the last decision saw (the reward's prev_state)

    @torch.no_grad()
    def act(self, obs: Array, state: GameArrays, car_teams: Array) -> Array:
        logits = self.policy.logits(obs)
        probs = torch.softmax(logits, -1)
        best = logits.argmax(-1)
        if self.policy.deterministic:
            chosen = best
        else:  # exactly NeuralPolicy.act's draw, from the generator speedflip eval seeds
            chosen = torch.multinomial(probs, 1, generator=self.policy.generator).squeeze(-1)
        log_p = torch.log_softmax(logits, -1)
        self.p_argmax.append(probs.max(-1).values.numpy())
        self.entropy.append((-(probs * log_p).sum(-1)).numpy())
        self.off_argmax.append((chosen != best).numpy())
        self.ball.append(state.ball[:, 0, L.BALL_POS].copy())
        self.state_before = state.copy()
        out: Array = chosen.numpy()
        return out

    def reset(self, rows: Array) -> None:
        self.policy.reset(rows)


@dataclass(frozen=True)
class ZoneDecisions:
    """One group of games (A won them, or not) in one zone: see the module docstring."""

    group: str
    zone: str
    decisions: int
    share: float
    off_argmax: float
    p_argmax: float
    entropy: float
    reward_per_second: float
    reward_per_second_by_component: dict[str, float] = field(default_factory=dict)


def summarize_decisions(
    group: str,
    zone: Array,
    off_argmax: Array,
    p_argmax: Array,
    entropy: Array,
    rewards: Mapping[str, Array],
    counted: Array,
    step_seconds: float,
) -> list[ZoneDecisions]:
    """Per zone, A's decisions of one group of games: every array is ``[T, G]`` (steps, the group's games);
    ``rewards[name]`` is the weighted component A got for the step the decision started, ``counted`` the steps
    whose reward is known (not a goal's). Reward per second = the zone's counted reward / its counted seconds."""
    total = zone.size
    out = []
    for index, name in enumerate(DECISION_ZONES):
        here = zone == index
        paid = here & counted
        seconds = float(paid.sum()) * step_seconds
        by_component = {c: float(r[paid].sum()) / seconds if seconds else 0.0 for c, r in rewards.items()}
        n = int(here.sum())
        out.append(
            ZoneDecisions(
                group=group,
                zone=name,
                decisions=n,
                share=n / total if total else 0.0,
                off_argmax=float(off_argmax[here].mean()) if n else 0.0,
                p_argmax=float(p_argmax[here].mean()) if n else 0.0,
                entropy=float(entropy[here].mean()) if n else 0.0,
                reward_per_second=sum(by_component.values()),
                reward_per_second_by_component=by_component,
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    args = match_parser(__doc__).parse_args(argv)
    match = open_match(args, "sampled_decisions.py")
    if match is None:
        return 2
    env, policy_a = match.env, match.policy_a
    if not isinstance(policy_a, NeuralPolicy):
        print(f"sampled_decisions.py: '{args.a}' is not one checkpoint; give a run or a checkpoint", file=sys.stderr)
        env.close()
        return 2
    trained = verify_checkpoint(find_checkpoint(args.a)).get("config", {}).get("env", {}).get("rewards") or {}
    weights = {name: float(w) for name, w in trained.items() if name != "goal" and w}
    recorder = DecisionRecorder(policy_a)
    K, C = env.num_arenas, env.num_cars
    reward_log: dict[str, list[Array]] = {name: [] for name in weights}
    counted_log: list[Array] = []

    def on_step(cars_before: Array, ended: Array) -> None:
        state = env.state
        touched = state.cars[:, :, 0, L.CAR_HIT_LAST_STEP] > 0.5
        ctx = RewardContext(state, env.car_teams, touched, np.full(K, -1), recorder.state_before)
        for name, weight in weights.items():
            reward_log[name].append(weight * REWARD_COMPONENTS[name](ctx))  # [K, C]; A's car picked after the match
        counted_log.append(~ended)

    try:
        results = play_match(env, recorder, match.policy_b, args.game_seconds, on_step=on_step)
    finally:
        env.close()
    summary = summarize(results)
    T = len(counted_log)
    a_is_blue = np.array([r.a_is_blue for r in results])  # the sides play_match gave A, as ball_zones.py reads them
    a_car, _ = a_and_b_cars(env.car_teams, a_is_blue)
    arenas = np.arange(K)

    def a_rows(per_row: list[Array]) -> Array:
        return np.stack(per_row).reshape(T, K, C)[:, arenas, a_car]  # [T, K]

    zone = decision_zone(to_a_frame(np.stack(recorder.ball), a_is_blue))
    off, p_max, ent = a_rows(recorder.off_argmax), a_rows(recorder.p_argmax), a_rows(recorder.entropy)
    rewards = {name: np.stack(v)[:, arenas, a_car] for name, v in reward_log.items()}
    counted = np.stack(counted_log)
    won = np.array([r.goals_a > r.goals_b for r in results])
    step_seconds = env.cfg.tick_skip / L.TICK_RATE
    rows: list[ZoneDecisions] = []
    for group, cols in (("won", np.flatnonzero(won)), ("not won", np.flatnonzero(~won))):
        rows += summarize_decisions(
            group, zone[:, cols], off[:, cols], p_max[:, cols], ent[:, cols],
            {n: r[:, cols] for n, r in rewards.items()}, counted[:, cols], step_seconds,
        )  # fmt: skip
    print(
        f"{policy_a.name} vs {match.policy_b.name}, {K} games of {args.game_seconds:g} s, {match.mode}: "
        f"{summary.wins} / {summary.draws} / {summary.losses} ({summary.goals_a}:{summary.goals_b}); "
        f"A's decisions by where the ball was; reward: {', '.join(f'{n} {w:g}' for n, w in weights.items())}"
    )
    print(f"{'group':<9}{'zone':<14}{'share':>8}{'off_argmax':>12}{'p_argmax':>10}{'entropy':>9}{'reward/s':>10}")
    for r in rows:
        print(
            f"{r.group:<9}{r.zone:<14}{r.share:>8.3f}{r.off_argmax:>12.3f}{r.p_argmax:>10.3f}{r.entropy:>9.3f}"
            f"{r.reward_per_second:>10.3f}"
        )
    write_report(args, match, summary, {"reward_weights": weights, "zones": [asdict(r) for r in rows]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
