"""Observation builders over arrays: every agent of every arena in one pass, no Python loop.

Each agent sees the field from its own team's side (orange gets RocketSim's inverted view), so a
policy trained on both teams learns one game, and blue and orange at a symmetric kickoff receive
exactly the same observation.
"""

from __future__ import annotations

import numpy as np

from speedflip._types import Array
from speedflip.env import layout as L
from speedflip.env.actions import NUM_CONTROLS
from speedflip.env.arenas import GameArrays

POS_COEF = 1.0 / 2300.0
VEL_COEF = 1.0 / 2300.0
ANG_VEL_COEF = 1.0 / np.pi
BOOST_COEF = 1.0 / 100.0

BALL_FEATURES = 9  # pos, vel, ang_vel
CAR_FEATURES = 18  # pos, forward, up, vel, ang_vel, boost, on_ground, is_demoed
SELF_EXTRA = 9  # ball relative position, ball relative velocity, ball position in the car's frame
OTHER_EXTRA = 7  # position and velocity relative to self, slot filled flag


def _car_block(rows: Array) -> Array:
    """``[..., 36]`` gym car rows -> ``[..., 18]`` scaled features."""
    return np.concatenate(
        [
            rows[..., L.CAR_POS] * POS_COEF,
            rows[..., L.CAR_FORWARD],
            rows[..., L.CAR_UP],
            rows[..., L.CAR_VEL] * VEL_COEF,
            rows[..., L.CAR_ANG_VEL] * ANG_VEL_COEF,
            rows[..., L.CAR_BOOST : L.CAR_BOOST + 1] * BOOST_COEF,
            rows[..., L.CAR_ON_GROUND : L.CAR_ON_GROUND + 1],
            rows[..., L.CAR_IS_DEMOED : L.CAR_IS_DEMOED + 1],
        ],
        axis=-1,
    )


class DefaultObs:
    """Ball, self, teammates, opponents (padded to the larger team), boost pads, previous controls.

    Size for a given pair of team sizes is fixed: with ``m = max(blue_size, orange_size, team_size)``
    (``team_size`` pads further, to keep one size across curriculum stages),
    ``9 + 27 + 25 * (m - 1) + 25 * m + 34 + 8`` floats (103 in 1v1, 153 in 2v2 and 1v2).
    """

    def __init__(self, blue_size: int, orange_size: int, team_size: int = 0) -> None:
        self.blue_size = blue_size
        self.orange_size = orange_size
        self.num_cars = blue_size + orange_size
        self.car_teams = np.array([L.BLUE] * blue_size + [L.ORANGE] * orange_size)
        max_team = max(blue_size, orange_size, team_size)
        self.teammate_slots = max_team - 1
        self.opponent_slots = max_team
        self.teammate_index = self._slot_index(same_team=True, slots=self.teammate_slots)
        self.opponent_index = self._slot_index(same_team=False, slots=self.opponent_slots)
        self.obs_dim = (
            BALL_FEATURES
            + CAR_FEATURES
            + SELF_EXTRA
            + (CAR_FEATURES + OTHER_EXTRA) * (self.teammate_slots + self.opponent_slots)
            + L.NUM_BOOST_PADS
            + NUM_CONTROLS
        )

    def _slot_index(self, same_team: bool, slots: int) -> Array:
        """``[C, slots]`` car indices (``-1`` = empty slot) of each car's teammates or opponents."""
        index = np.full((self.num_cars, slots), -1, dtype=np.int64)
        for viewer in range(self.num_cars):
            others = [
                c
                for c in range(self.num_cars)
                if c != viewer and (self.car_teams[c] == self.car_teams[viewer]) == same_team
            ]
            index[viewer, : len(others)] = others
        return index

    def build(self, state: GameArrays, prev_controls: Array) -> Array:
        """``state`` of K arenas, ``prev_controls [K, C, 8]`` -> observations ``[K * C, obs_dim]``."""
        K, C = state.cars.shape[0], self.num_cars
        viewers = np.arange(C)
        views = state.cars.transpose(0, 2, 1, 3)[:, self.car_teams]  # [K, viewer, target, 36]
        ball = state.ball[:, self.car_teams]  # [K, C, 25]
        pads = state.pads[:, self.car_teams]  # [K, C, 34]
        me = views[:, viewers, viewers]  # [K, C, 36]

        ball_pos, ball_vel = ball[..., L.BALL_POS], ball[..., L.BALL_VEL]
        my_pos, my_vel = me[..., L.CAR_POS], me[..., L.CAR_VEL]
        rel_ball = ball_pos - my_pos
        local_ball = np.stack(
            [
                np.einsum("kci,kci->kc", rel_ball, me[..., L.CAR_FORWARD]),
                np.einsum("kci,kci->kc", rel_ball, me[..., L.CAR_RIGHT]),
                np.einsum("kci,kci->kc", rel_ball, me[..., L.CAR_UP]),
            ],
            axis=-1,
        )
        parts = [
            ball_pos * POS_COEF,
            ball_vel * VEL_COEF,
            ball[..., L.BALL_ANG_VEL] * ANG_VEL_COEF,
            _car_block(me),
            rel_ball * POS_COEF,
            (ball_vel - my_vel) * VEL_COEF,
            local_ball * POS_COEF,
        ]
        for index in (self.teammate_index, self.opponent_index):
            if index.shape[1] == 0:
                continue
            others = views[:, viewers[:, None], np.maximum(index, 0)]  # [K, C, S, 36]
            present = (index >= 0).astype(np.float32)[None, :, :, None]
            block = np.concatenate(
                [
                    _car_block(others),
                    (others[..., L.CAR_POS] - my_pos[:, :, None]) * POS_COEF,
                    (others[..., L.CAR_VEL] - my_vel[:, :, None]) * VEL_COEF,
                    np.ones((*others.shape[:-1], 1), np.float32),
                ],
                axis=-1,
            )
            parts.append((block * present).reshape(K, C, -1))
        parts.append(pads)
        parts.append(prev_controls)
        obs: Array = np.concatenate(parts, axis=-1).astype(np.float32, copy=False)
        return obs.reshape(K * C, self.obs_dim)
