"""The soccar field's left-right mirror: ``x -> -x`` in each agent's own view, for observations and actions.

The field, its goals, boost pads and kickoff spots are symmetric under the reflection ``x -> -x`` (the
plane through both goals' centres), and so is RocketSim's car. A transition mirrored that way is a
transition the game can produce: the same ball and cars on the other side, the mirrored controls (steer,
yaw and roll turned the other way). ``ppo.mirror_augment`` trains on the rollout rows' mirrors, ``ppo.mirror_coef``
holds the policy near its own mirror
(docs/learning.md, fifty-fourth session).

How each observed quantity changes, with ``R = diag(-1, 1, 1)``:

- positions, velocities and the car's forward and up vectors are true vectors: ``v -> R v`` (x negated);
- angular velocities are pseudovectors: ``w -> det(R) R w = (w_x, -w_y, -w_z)``;
- the mirrored car's *right* vector is ``-R right`` (its right side is the original's left), so a vector
  in the car's frame ``(forward, right, up)`` keeps its forward and up parts and negates its right part,
  and an angular velocity in the car's frame keeps its right part (pitch) and negates the other two
  (roll and yaw);
- boost pads swap with their mirrored pads; controls negate steer, yaw and roll.

Every one of these is a permutation of the observation's entries and a sign: a
:class:`speedflip.rollout.Mirror`.
"""

from __future__ import annotations

import numpy as np
import RocketSim as rsim

from speedflip._types import Array
from speedflip.config import EnvConfig
from speedflip.env import layout as L
from speedflip.env.actions import ActionError
from speedflip.env.obs import AdvancedObs, DefaultObs
from speedflip.env.sim import init_rocketsim
from speedflip.rollout import Mirror

# throttle, steer, pitch, yaw, roll, jump, boost, handbrake: steer, yaw and roll turn the other way
CONTROL_SIGNS = (1.0, -1.0, 1.0, -1.0, -1.0, 1.0, 1.0, 1.0)
VECTOR = (-1.0, 1.0, 1.0)  # a position, velocity, forward or up vector in world coordinates
PSEUDOVECTOR = (1.0, -1.0, -1.0)  # an angular velocity in world coordinates
LOCAL_VECTOR = (1.0, -1.0, 1.0)  # a vector's (forward, right, up) parts in the car's frame
LOCAL_PSEUDOVECTOR = (-1.0, 1.0, -1.0)  # an angular velocity's (forward, right, up) parts: roll, pitch, yaw
SCALAR = (1.0,)


class MirrorError(ValueError):
    """A configuration the left-right mirror cannot be built for."""


class _Layout:
    """An observation mirror's index and sign, block by block in the order an observation builder concatenates."""

    def __init__(self) -> None:
        self.index: list[int] = []
        self.sign: list[float] = []

    def add(self, *signs: tuple[float, ...]) -> None:
        """Entries that stay in place, with these signs (one tuple per quantity)."""
        for group in signs:
            for s in group:
                self.index.append(len(self.index))
                self.sign.append(s)

    def permuted(self, perm: Array, sign: float = 1.0) -> None:
        """``len(perm)`` entries where entry ``i`` takes entry ``perm[i]`` of the same block."""
        start = len(self.index)
        self.index.extend(int(start + p) for p in perm)
        self.sign.extend([sign] * len(perm))

    def build(self, frame_stack: int) -> tuple[Array, Array]:
        """``(index, sign)`` over ``frame_stack`` frames laid end to end."""
        frame = len(self.index)
        index = np.concatenate([np.asarray(self.index) + f * frame for f in range(frame_stack)])
        sign = np.tile(np.asarray(self.sign, np.float32), frame_stack)
        return index.astype(np.int64), sign


def action_mirror(table: Array) -> Array:
    """``mirror[i]``: the row of ``table`` that is row ``i`` with steer, yaw and roll negated.

    Raises :class:`~speedflip.env.actions.ActionError` when a row has no mirrored row in the table.
    """
    want = table * np.asarray(CONTROL_SIGNS, np.float32)
    mirror = np.full(table.shape[0], -1, np.int64)
    for i, row in enumerate(want):
        hits = np.flatnonzero(np.all(np.isclose(table, row, atol=1e-6), axis=1))
        if hits.size == 0:
            raise ActionError(
                f"the action table has no left-right mirror of row {i} ({table[i].tolist()}): it needs a row "
                f"{row.tolist()} (steer, yaw and roll negated); add it to env.action_table or set "
                "ppo.mirror_augment=none and ppo.mirror_coef=0"
            )
        mirror[i] = int(hits[0])
    return mirror


def pad_mirror(pad_positions: Array) -> Array:
    """``mirror[i]``: the boost pad at pad ``i``'s position with x negated (positions ``[34, 3]``)."""
    target = pad_positions * np.asarray(VECTOR, np.float32)
    dist = np.linalg.norm(pad_positions[None, :, :] - target[:, None, :], axis=-1)
    mirror: Array = np.argmin(dist, axis=1).astype(np.int64)
    if np.any(dist[np.arange(len(mirror)), mirror] > 1.0) or len(set(mirror.tolist())) != len(mirror):
        raise MirrorError("the arena's boost pads are not left-right symmetric; the mirror cannot be used")
    return mirror


def soccar_pad_positions() -> Array:
    """The soccar arena's boost pad positions ``[34, 3]`` as RocketSim lists them (blue's view)."""
    init_rocketsim()
    arena = rsim.Arena(rsim.GameMode.SOCCAR)
    return np.array([p.get_pos().as_numpy() for p in arena.get_boost_pads()], np.float32)


def _car_block(layout: _Layout) -> None:
    """DefaultObs' 18 car features: pos, forward, up, vel, ang_vel, boost, on_ground, is_demoed."""
    layout.add(VECTOR, VECTOR, VECTOR, VECTOR, PSEUDOVECTOR, SCALAR, SCALAR, SCALAR)


def default_obs_mirror(builder: DefaultObs, pads: Array, frame_stack: int = 1) -> tuple[Array, Array]:
    """The mirror of :class:`~speedflip.env.obs.DefaultObs` observations (``pads``: :func:`pad_mirror`)."""
    layout = _Layout()
    layout.add(VECTOR, VECTOR, PSEUDOVECTOR)  # ball: pos, vel, ang_vel
    _car_block(layout)  # self
    layout.add(VECTOR, VECTOR, LOCAL_VECTOR)  # ball relative to self, relative velocity, in the car's frame
    for _ in range(builder.teammate_slots + builder.opponent_slots):
        _car_block(layout)
        layout.add(VECTOR, VECTOR, SCALAR)  # relative position and velocity, slot filled
    layout.permuted(pads)
    layout.add(CONTROL_SIGNS)
    assert len(layout.index) == builder.obs_dim, (len(layout.index), builder.obs_dim)
    return layout.build(frame_stack)


def advanced_obs_mirror(builder: AdvancedObs, frame_stack: int = 1) -> tuple[Array, Array]:
    """The mirror of :class:`~speedflip.env.obs.AdvancedObs` observations.

    Its boost pads are the nearest ones by distance, which the mirror keeps, so they stay in place.
    """
    layout = _Layout()
    layout.add(VECTOR, VECTOR, PSEUDOVECTOR)  # ball
    layout.add(LOCAL_VECTOR, LOCAL_VECTOR)  # ball position and velocity in the car's frame
    layout.add(VECTOR, VECTOR, PSEUDOVECTOR, VECTOR, VECTOR, LOCAL_VECTOR, LOCAL_PSEUDOVECTOR, SCALAR, SCALAR, SCALAR)
    for _ in range(builder.slots.teammate_slots + builder.slots.opponent_slots):
        layout.add(LOCAL_VECTOR, LOCAL_VECTOR, VECTOR, VECTOR, VECTOR, VECTOR, SCALAR, SCALAR, SCALAR, SCALAR)
    for offset in (LOCAL_VECTOR, VECTOR):  # pads nearest the car (its frame), then the ball (world)
        for _ in range(builder.nearest):
            layout.add(offset, SCALAR, SCALAR, SCALAR)
    layout.add(CONTROL_SIGNS)
    assert len(layout.index) == builder.obs_dim, (len(layout.index), builder.obs_dim)
    return layout.build(frame_stack)


def env_mirror(env: EnvConfig, table: Array) -> Mirror:
    """The left-right mirror of an environment built from ``env`` acting with the lookup ``table``."""
    if env.rlgym is not None:
        raise MirrorError(
            "the left-right mirror needs speedflip's own observation builders, not env.rlgym (an RLGym v2 "
            "observation has no known mirror); set ppo.mirror_augment=none and ppo.mirror_coef=0"
        )
    positions = soccar_pad_positions()
    if env.obs_builder == "advanced":
        builder = AdvancedObs(
            env.blue_size, env.orange_size, env.obs_team_size, pad_positions=positions,
            pad_is_big=np.zeros(L.NUM_BOOST_PADS, bool), nearest_pads=env.nearest_pads,
        )  # fmt: skip
        index, sign = advanced_obs_mirror(builder, env.frame_stack)
    else:
        default = DefaultObs(env.blue_size, env.orange_size, env.obs_team_size)
        index, sign = default_obs_mirror(default, pad_mirror(positions), env.frame_stack)
    return Mirror(index, sign, action_mirror(table))


__all__ = [
    "CONTROL_SIGNS",
    "MirrorError",
    "action_mirror",
    "advanced_obs_mirror",
    "default_obs_mirror",
    "env_mirror",
    "pad_mirror",
    "soccar_pad_positions",
]
