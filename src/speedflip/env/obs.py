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


def _local(vectors: Array, forward: Array, right: Array, up: Array) -> Array:
    """World vectors ``[..., 3]`` -> the car's frame (forward, right, up components)."""
    return np.stack([np.sum(vectors * forward, -1), np.sum(vectors * right, -1), np.sum(vectors * up, -1)], axis=-1)


class PadTimers:
    """Seconds until each boost pad is back, tracked from the pads' active flags (both perspectives).

    RocketSim's gym state only says whether a pad is active; when a pad goes from active to inactive
    its timer starts at the pad's cooldown (10 s big, 4 s small) and counts down by the step length.
    """

    def __init__(self, num_arenas: int, pad_is_big: Array) -> None:
        big = np.stack([pad_is_big, pad_is_big[::-1]])  # perspective 1 lists the pads in reverse order
        self.cooldown = np.where(big, 10.0, 4.0).astype(np.float32)[None]  # [1, 2, 34]
        self.timers = np.zeros((num_arenas, 2, L.NUM_BOOST_PADS), np.float32)
        self.prev_active = np.ones((num_arenas, 2, L.NUM_BOOST_PADS), bool)

    def update(self, pads: Array, seconds: float, ids: Array | None = None) -> None:
        """Advance by ``seconds`` using the current active flags ``pads [K, 2, 34]`` (or rows ``ids``)."""
        sel = slice(None) if ids is None else ids
        active = pads[sel] > 0.5
        taken = self.prev_active[sel] & ~active
        counting = np.maximum(self.timers[sel] - seconds, 0.0)
        self.timers[sel] = np.where(active, 0.0, np.where(taken, self.cooldown, counting))
        self.prev_active[sel] = active


class AdvancedObs:
    """Ball and cars in world and car-relative frames, padded (optionally shuffled) teammate and
    opponent slots, the nearest boost pads to the car and to the ball with their timers, previous
    controls. Every vector is seen from the agent's own side of the field.

    Size with ``m`` slots per team and ``n`` nearest pads (car) and ``n`` (ball):
    ``9 + 6 + 24 + 22 * (2m - 1) + 6n + 6n + 8``.
    """

    SELF_FEATURES = 24
    OTHER_FEATURES = 22
    PAD_FEATURES = 6

    def __init__(
        self,
        blue_size: int,
        orange_size: int,
        team_size: int = 0,
        pad_positions: Array | None = None,
        pad_is_big: Array | None = None,
        nearest_pads: int = 4,
        shuffle_slots: bool = False,
        seed: int = 0,
    ) -> None:
        self.slots = DefaultObs(blue_size, orange_size, team_size)  # reuse its slot tables
        self.num_cars = self.slots.num_cars
        self.car_teams = self.slots.car_teams
        if pad_positions is None or pad_is_big is None:
            raise ValueError("AdvancedObs needs the arena's boost pad positions and sizes")
        self.pad_pos = np.asarray(pad_positions, np.float32)  # [34, 3], same in both perspectives
        self.pad_big = np.stack([pad_is_big, pad_is_big[::-1]]).astype(np.float32)  # [2, 34]
        self.nearest = min(nearest_pads, L.NUM_BOOST_PADS)
        self.shuffle_slots = shuffle_slots
        self.rng = np.random.default_rng(seed)
        others = self.slots.teammate_slots + self.slots.opponent_slots
        self.obs_dim = (
            BALL_FEATURES + 6 + self.SELF_FEATURES + self.OTHER_FEATURES * others
            + 2 * self.PAD_FEATURES * self.nearest + NUM_CONTROLS
        )  # fmt: skip

    def build(self, state: GameArrays, prev_controls: Array, pad_timers: Array) -> Array:
        """``state``, ``prev_controls [K, C, 8]``, ``pad_timers [K, 2, 34]`` -> ``[K * C, obs_dim]``."""
        K, C = state.cars.shape[0], self.num_cars
        viewers = np.arange(C)
        views = state.cars.transpose(0, 2, 1, 3)[:, self.car_teams]  # [K, viewer, target, 36]
        ball = state.ball[:, self.car_teams]
        me = views[:, viewers, viewers]
        fwd, right, up = me[..., L.CAR_FORWARD], me[..., L.CAR_RIGHT], me[..., L.CAR_UP]
        my_pos, my_vel = me[..., L.CAR_POS], me[..., L.CAR_VEL]
        ball_pos, ball_vel = ball[..., L.BALL_POS], ball[..., L.BALL_VEL]
        parts = [
            ball_pos * POS_COEF,
            ball_vel * VEL_COEF,
            ball[..., L.BALL_ANG_VEL] * ANG_VEL_COEF,
            _local(ball_pos - my_pos, fwd, right, up) * POS_COEF,
            _local(ball_vel - my_vel, fwd, right, up) * VEL_COEF,
            my_pos * POS_COEF,
            my_vel * VEL_COEF,
            me[..., L.CAR_ANG_VEL] * ANG_VEL_COEF,
            fwd,
            up,
            _local(my_vel, fwd, right, up) * VEL_COEF,
            _local(me[..., L.CAR_ANG_VEL], fwd, right, up) * ANG_VEL_COEF,
            me[..., L.CAR_BOOST : L.CAR_BOOST + 1] * BOOST_COEF,
            me[..., L.CAR_ON_GROUND : L.CAR_ON_GROUND + 1],
            me[..., L.CAR_IS_DEMOED : L.CAR_IS_DEMOED + 1],
        ]
        for index in (self.slots.teammate_index, self.slots.opponent_index):
            if index.shape[1] == 0:
                continue
            if self.shuffle_slots:
                index = self.rng.permuted(np.broadcast_to(index, (K, *index.shape)), axis=2)
                others = views[np.arange(K)[:, None, None], viewers[None, :, None], np.maximum(index, 0)]
                present = (index >= 0).astype(np.float32)[..., None]
            else:
                others = views[:, viewers[:, None], np.maximum(index, 0)]  # [K, C, S, 36]
                present = (index >= 0).astype(np.float32)[None, :, :, None]
            f3, r3, u3 = fwd[:, :, None], right[:, :, None], up[:, :, None]
            block = np.concatenate(
                [
                    _local(others[..., L.CAR_POS] - my_pos[:, :, None], f3, r3, u3) * POS_COEF,
                    _local(others[..., L.CAR_VEL] - my_vel[:, :, None], f3, r3, u3) * VEL_COEF,
                    others[..., L.CAR_POS] * POS_COEF,
                    others[..., L.CAR_VEL] * VEL_COEF,
                    others[..., L.CAR_FORWARD],
                    others[..., L.CAR_UP],
                    others[..., L.CAR_BOOST : L.CAR_BOOST + 1] * BOOST_COEF,
                    others[..., L.CAR_ON_GROUND : L.CAR_ON_GROUND + 1],
                    others[..., L.CAR_IS_DEMOED : L.CAR_IS_DEMOED + 1],
                    np.ones((*others.shape[:-1], 1), np.float32),
                ],
                axis=-1,
            )
            parts.append((block * present).reshape(K, C, -1))
        active = state.pads[:, self.car_teams]  # [K, C, 34]
        timers = pad_timers[:, self.car_teams] / 10.0
        big = self.pad_big[self.car_teams][None]  # [1, C, 34]
        for anchor, frame in ((my_pos, (fwd, right, up)), (ball_pos, None)):
            offset = self.pad_pos[None, None] - anchor[:, :, None]  # [K, C, 34, 3]
            dist = np.linalg.norm(offset, axis=-1)
            near = np.argsort(dist, axis=-1)[..., : self.nearest]  # [K, C, n]
            picked = np.take_along_axis(offset, near[..., None], axis=2)
            if frame is not None:
                picked = _local(picked, frame[0][:, :, None], frame[1][:, :, None], frame[2][:, :, None])
            feats = np.concatenate(
                [
                    picked * POS_COEF,
                    np.take_along_axis(np.broadcast_to(big, active.shape), near, axis=2)[..., None],
                    np.take_along_axis(active, near, axis=2)[..., None],
                    np.take_along_axis(timers, near, axis=2)[..., None],
                ],
                axis=-1,
            )
            parts.append(feats.reshape(K, C, -1))
        parts.append(prev_controls)
        obs: Array = np.concatenate(parts, axis=-1).astype(np.float32, copy=False)
        return obs.reshape(K * C, self.obs_dim)


def observation_size(
    obs_builder: str, blue_size: int, orange_size: int, team_size: int, nearest_pads: int, frame_stack: int
) -> int:
    """The observation length an env config gives, without building an env (checked against checkpoints)."""
    default = DefaultObs(blue_size, orange_size, team_size)
    if obs_builder == "default":
        base = default.obs_dim
    else:
        others = default.teammate_slots + default.opponent_slots
        n = min(nearest_pads, L.NUM_BOOST_PADS)
        base = (
            BALL_FEATURES + 6 + AdvancedObs.SELF_FEATURES + AdvancedObs.OTHER_FEATURES * others
            + 2 * AdvancedObs.PAD_FEATURES * n + NUM_CONTROLS
        )  # fmt: skip
    return base * frame_stack
