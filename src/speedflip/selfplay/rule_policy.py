"""A deterministic rule-based player on the lookup-table action interface (the fixed baseline).

Per car, from its own side of the field (the opponent goal is at +y):
- if the ball is behind the car (closer to its own goal), it drives back to a point goal-side of
  the ball (between the ball and its own goal), to defend;
- otherwise it drives to a point just behind the ball on the line from the opponent goal through
  the ball, so that reaching the point pushes the ball towards the opponent goal;
- it boosts when it faces the target and the target is far, powerslides in sharp turns, and jumps
  for a ball in reach above the car.
Everything is computed over arrays for all cars of all arenas at once.
"""

from __future__ import annotations

import numpy as np

from speedflip._types import Array
from speedflip.env import layout as L
from speedflip.env.actions import default_lookup_table
from speedflip.env.arenas import GameArrays

OPPONENT_GOAL = np.array([0.0, L.BACK_WALL_Y, 300.0], np.float32)
DEFENSIVE_Y = -L.BACK_WALL_Y + 600.0


class RulePolicy:
    """Chooses lookup-table rows with simple driving rules. Deterministic."""

    def __init__(self, table: Array) -> None:
        self.table = table
        index = {tuple(float(x) for x in row): i for i, row in enumerate(table)}

        def row(throttle: float, steer: float, boost: float, handbrake: float, jump: float = 0.0) -> int:
            key = (throttle, steer, 0.0, steer, 0.0, jump, boost, handbrake)
            if key not in index:
                raise ValueError(
                    f"RulePolicy needs the action row {key} (throttle, steer, pitch, yaw, roll, jump, boost, "
                    "handbrake), which this lookup table lacks; use the default table"
                )
            return index[key]

        steers = (-1.0, 0.0, 1.0)
        # [steer_index, boost, handbrake] -> table row
        self.drive = np.array([[[row(1.0, s, b, h) for h in (0.0, 1.0)] for b in (0.0, 1.0)] for s in steers], np.int64)
        self.jump = row(1.0, 0.0, 0.0, 0.0, jump=1.0) if (1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0) in index else None

    @classmethod
    def for_table(cls, table: Array) -> RulePolicy:
        """A rule bot on ``table`` if it has the rows the rules need, else on the default table (its
        :attr:`table` then differs from ``table``: a match decodes its rows with it)."""
        try:
            return cls(table)
        except ValueError:
            return cls(default_lookup_table())

    def act(self, state: GameArrays, car_teams: Array) -> Array:
        """Action indices ``[K * C]`` for every car of every arena."""
        C = car_teams.shape[0]
        cars = state.cars[:, np.arange(C), car_teams]  # [K, C, 36], each car's own view
        ball = state.ball[:, car_teams]  # [K, C, 25]
        pos, fwd, right = cars[..., L.CAR_POS], cars[..., L.CAR_FORWARD], cars[..., L.CAR_RIGHT]
        ball_pos = ball[..., L.BALL_POS]

        to_goal = OPPONENT_GOAL - ball_pos
        to_goal /= np.maximum(np.linalg.norm(to_goal, axis=-1, keepdims=True), 1e-6)
        distance_to_ball = np.linalg.norm((ball_pos - pos)[..., :2], axis=-1)
        behind_offset = np.clip(distance_to_ball * 0.3, 60.0, 500.0)[..., None]
        attack = ball_pos - to_goal * behind_offset
        defend = np.stack(
            [
                ball_pos[..., 0] * 0.7,
                np.maximum(ball_pos[..., 1] - 1000.0, DEFENSIVE_Y),
                np.zeros_like(ball_pos[..., 0]),
            ],
            axis=-1,
        )
        ball_behind = pos[..., 1] > ball_pos[..., 1] + 200.0
        target = np.where(ball_behind[..., None], defend, attack)

        rel = target - pos
        rel[..., 2] = 0.0
        dist = np.linalg.norm(rel, axis=-1)
        direction = rel / np.maximum(dist, 1e-6)[..., None]
        forward_dot = np.sum(direction * fwd, axis=-1)
        right_dot = np.sum(direction * right, axis=-1)
        steer_index = np.where(right_dot > 0.05, 2, np.where(right_dot < -0.05, 0, 1))
        steer_index = np.where(forward_dot < 0.0, np.where(right_dot >= 0.0, 2, 0), steer_index)
        boost = ((forward_dot > 0.9) & (dist > 800.0) & (cars[..., L.CAR_BOOST] > 0)).astype(np.int64)
        handbrake = ((forward_dot < -0.2) & (np.abs(right_dot) > 0.3)).astype(np.int64)
        actions = self.drive[steer_index, boost, handbrake]

        if self.jump is not None:
            ball_height = ball_pos[..., 2] - pos[..., 2]
            in_reach = (distance_to_ball < 250.0) & (ball_height > 150.0) & (ball_height < 450.0)
            on_ground = cars[..., L.CAR_ON_GROUND] > 0.5
            actions = np.where(in_reach & on_ground & ~ball_behind, self.jump, actions)
        out: Array = actions.reshape(-1)
        return out
