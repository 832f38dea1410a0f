"""Reward components over arrays and their weighted sum.

A component is a function ``RewardContext -> [K, C] float32`` (one value per car of every arena).
Components read the state from each car's own side of the field (orange's view is mirrored), so
"the opponent goal" is always at +y.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from speedflip._types import Array
from speedflip.env import layout as L
from speedflip.env.arenas import GameArrays

OPPONENT_GOAL = np.array([0.0, L.BACK_WALL_Y + L.BALL_RADIUS, L.GOAL_CENTER_Z], np.float32)


@dataclass
class RewardContext:
    """What reward components may look at after a step."""

    state: GameArrays
    car_teams: Array  # [C]
    touched: Array  # [K, C] bool: the car touched the ball during this step
    goal_team: Array  # [K] int: -1 no goal, 0 blue scored, 1 orange scored

    def own_view(self) -> tuple[Array, Array]:
        """``(cars [K, C, 36], ball [K, C, 25])``, each car and the ball seen from the car's own side."""
        C = self.car_teams.shape[0]
        cars = self.state.cars[:, np.arange(C), self.car_teams]
        ball = self.state.ball[:, self.car_teams]
        return cars, ball


RewardFn = Callable[[RewardContext], Array]


def _unit(v: Array) -> Array:
    out: Array = v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-6)
    return out


def goal(ctx: RewardContext) -> Array:
    """+1 to every car of the team that scored, -1 to every car of the team that conceded."""
    scored = ctx.goal_team[:, None] == ctx.car_teams[None, :]
    conceded = (ctx.goal_team[:, None] >= 0) & ~scored
    return np.asarray(scored, np.float32) - np.asarray(conceded, np.float32)


def touch(ctx: RewardContext) -> Array:
    """1 for a car that touched the ball during the step."""
    return np.asarray(ctx.touched, np.float32)


def velocity_player_to_ball(ctx: RewardContext) -> Array:
    """Car speed towards the ball, as a fraction of the car's top speed (-1..1)."""
    cars, ball = ctx.own_view()
    direction = _unit(ball[..., L.BALL_POS] - cars[..., L.CAR_POS])
    return np.asarray(np.sum(cars[..., L.CAR_VEL] * direction, axis=-1) / L.CAR_MAX_SPEED, np.float32)


def velocity_ball_to_goal(ctx: RewardContext) -> Array:
    """Ball speed towards the opponent goal, as a fraction of the ball's top speed (-1..1)."""
    _, ball = ctx.own_view()
    direction = _unit(OPPONENT_GOAL - ball[..., L.BALL_POS])
    return np.asarray(np.sum(ball[..., L.BALL_VEL] * direction, axis=-1) / L.BALL_MAX_SPEED, np.float32)


def face_ball(ctx: RewardContext) -> Array:
    """Cosine between the car's forward direction and the direction to the ball (-1..1)."""
    cars, ball = ctx.own_view()
    direction = _unit(ball[..., L.BALL_POS] - cars[..., L.CAR_POS])
    return np.asarray(np.sum(cars[..., L.CAR_FORWARD] * direction, axis=-1), np.float32)


REWARD_COMPONENTS: dict[str, RewardFn] = {
    "goal": goal,
    "touch": touch,
    "velocity_player_to_ball": velocity_player_to_ball,
    "velocity_ball_to_goal": velocity_ball_to_goal,
    "face_ball": face_ball,
}


class WeightedReward:
    """The weighted sum of named components; remembers each component's mean for logging."""

    def __init__(self, weights: Mapping[str, float]) -> None:
        unknown = sorted(set(weights) - set(REWARD_COMPONENTS))
        if unknown:
            raise ValueError(f"unknown reward component(s) {unknown}; available: {sorted(REWARD_COMPONENTS)}")
        self.weights = {name: float(w) for name, w in weights.items() if w != 0.0}
        self.last_means: dict[str, float] = {}

    def __call__(self, ctx: RewardContext) -> Array:
        K, C = ctx.touched.shape
        total = np.zeros((K, C), np.float32)
        for name, weight in self.weights.items():
            value = REWARD_COMPONENTS[name](ctx)
            self.last_means[name] = float(value.mean())
            total += weight * value
        return total
