"""The left-right mirror (``x -> -x``): action rows, boost pads, and observations checked on real RocketSim.

The observation test builds two arenas, the second the mirror image of the first (cars and ball placed by
hand), and asks that the second's observations are the first's mirrored; then it drives both with mirrored
actions and asks that they stay mirror images, which is the premise of ``ppo.mirror_augment`` (the game is
symmetric, so a mirrored row is a row the game could have produced).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import RocketSim as rsim

from speedflip.config import EnvConfig
from speedflip.env import layout as L
from speedflip.env.actions import ActionError, default_lookup_table
from speedflip.env.mirror import (
    CONTROL_SIGNS,
    MirrorError,
    action_mirror,
    env_mirror,
    pad_mirror,
    soccar_pad_positions,
)
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.rollout import Mirror

R = np.array([-1.0, 1.0, 1.0])


def test_action_mirror_negates_steer_yaw_roll_and_is_an_involution() -> None:
    table = default_lookup_table()
    mirror = action_mirror(table)
    np.testing.assert_array_equal(mirror[mirror], np.arange(len(table)))
    np.testing.assert_array_equal(table[mirror], table * np.array(CONTROL_SIGNS, np.float32))
    # by hand: full throttle steering left, boosting -> the same steering right
    left = np.flatnonzero(np.all(table == [1, -1, 0, -1, 0, 0, 1, 0], axis=1))[0]
    right = np.flatnonzero(np.all(table == [1, 1, 0, 1, 0, 0, 1, 0], axis=1))[0]
    assert mirror[left] == right and mirror[right] == left
    # a front flip (pitch only) is its own mirror; a side flip (roll) turns into the other side flip
    front = np.flatnonzero(np.all(table == [0, 0, -1, 0, 0, 1, 0, 1], axis=1))[0]
    assert mirror[front] == front
    side = np.flatnonzero(np.all(table == [0, 0, 0, 0, 1, 1, 0, 1], axis=1))[0]
    assert np.array_equal(table[mirror[side]], [0, 0, 0, 0, -1, 1, 0, 1])


def test_action_mirror_names_a_missing_row() -> None:
    table = np.array([[0, 0, 0, 0, 0, 0, 0, 0], [1, -1, 0, -1, 0, 0, 0, 0], [1, 0.5, 0, 0.5, 0, 0, 0, 0]], np.float32)
    with pytest.raises(
        ActionError, match=r"no left-right mirror of row 1 .* ppo.mirror_augment=none and ppo.mirror_coef=0"
    ):
        action_mirror(table)


def test_pad_mirror_pairs_pads_at_mirrored_positions() -> None:
    positions = soccar_pad_positions()
    mirror = pad_mirror(positions)
    np.testing.assert_array_equal(mirror[mirror], np.arange(L.NUM_BOOST_PADS))
    np.testing.assert_allclose(positions[mirror], positions * R, atol=1.0)
    on_axis = np.abs(positions[:, 0]) < 1.0  # pads on the x = 0 line are their own mirror
    np.testing.assert_array_equal(mirror[on_axis], np.flatnonzero(on_axis))
    assert on_axis.sum() < L.NUM_BOOST_PADS // 2
    with pytest.raises(MirrorError, match="not left-right symmetric"):
        pad_mirror(positions + np.array([100.0, 0.0, 0.0], np.float32))


def test_mirror_of_an_rlgym_env_is_refused() -> None:
    with pytest.raises(MirrorError, match=r"env\.rlgym"):
        env_mirror(EnvConfig().model_copy(update={"rlgym": object()}), default_lookup_table())


def _vec(v: np.ndarray) -> rsim.Vec:
    return rsim.Vec(float(v[0]), float(v[1]), float(v[2]))


def _place(env: RocketLeagueVecEnv, k: int, rng: np.random.Generator, mirror_of: int | None) -> None:
    """Arena ``k``: random cars and ball (``mirror_of`` None) or the mirror image of arena ``mirror_of``."""
    arena = env.arenas.arenas[k]
    if mirror_of is None:
        ball = arena.ball.get_state()
        ball.pos = _vec(np.array([rng.uniform(-2500, 2500), rng.uniform(-3000, 3000), rng.uniform(200, 800)]))
        ball.vel = _vec(rng.uniform(-800, 800, 3))
        ball.ang_vel = _vec(rng.uniform(-3, 3, 3))
        arena.ball.set_state(ball)
        for car in env.arenas.cars[k]:
            state = car.get_state()
            state.pos = _vec(np.array([rng.uniform(-3000, 3000), rng.uniform(-4000, 4000), 17.0]))
            state.vel = _vec(np.array([*rng.uniform(-900, 900, 2), 0.0]))
            state.ang_vel = _vec(np.array([0.0, 0.0, rng.uniform(-2, 2)]))
            state.rot_mat = rsim.Angle(float(rng.uniform(-np.pi, np.pi)), 0.0, 0.0).as_rot_mat()
            state.boost = float(rng.uniform(0, 100))
            car.set_state(state)
    else:
        src = env.arenas.arenas[mirror_of]
        ball = src.ball.get_state()
        ball.pos = _vec(ball.pos.as_numpy() * R)
        ball.vel = _vec(ball.vel.as_numpy() * R)
        ball.ang_vel = _vec(-ball.ang_vel.as_numpy() * R)  # a pseudovector: det(R) R w
        arena.ball.set_state(ball)
        for car, original in zip(env.arenas.cars[k], env.arenas.cars[mirror_of], strict=True):
            state = original.get_state()
            rot = state.rot_mat
            forward, right, up = (rot.forward.as_numpy(), rot.right.as_numpy(), rot.up.as_numpy())
            state.pos = _vec(state.pos.as_numpy() * R)
            state.vel = _vec(state.vel.as_numpy() * R)
            state.ang_vel = _vec(-state.ang_vel.as_numpy() * R)
            state.rot_mat = rsim.RotMat(_vec(forward * R), _vec(-right * R), _vec(up * R))
            car.set_state(state)
    env.arenas._read(k)


@pytest.mark.parametrize("obs_builder", ["default", "advanced"])
def test_observations_of_mirrored_arenas_are_mirrored_and_stay_so(
    make_env: Callable[..., RocketLeagueVecEnv], obs_builder: str
) -> None:
    env = make_env(seed=3, num_arenas=2, obs_builder=obs_builder, frame_stack=2, state_setters={"kickoff": 1.0})
    mirror = env_mirror(EnvConfig(obs_builder=obs_builder, frame_stack=2), env.actions.table)  # type: ignore[arg-type]
    assert isinstance(mirror, Mirror) and mirror.obs_index.shape == (env.obs_dim,)
    env.reset()
    rng = np.random.default_rng(0)
    _place(env, 0, rng, None)
    _place(env, 1, rng, 0)
    env._observe(None)
    env._observe(None)  # both stacked frames from the placed state
    obs = env.obs.reshape(2, 2, -1)  # [arena, car, D]
    assert not np.allclose(obs[0], obs[1], atol=1e-3)  # the placement is not symmetric by itself
    np.testing.assert_allclose(obs[1], mirror.obs(obs[0]), atol=1e-4)
    np.testing.assert_allclose(mirror.obs(mirror.obs(obs[0])), obs[0])
    # drive both: arena 1 takes the mirrored rows; RocketSim keeps them mirror images for a second of play
    table_rng = np.random.default_rng(1)
    for _ in range(15):
        actions = table_rng.integers(0, env.num_actions, size=2)
        env.step(np.concatenate([actions, mirror.action_index[actions]]))
        obs = env.obs.reshape(2, 2, -1)
        np.testing.assert_allclose(obs[1], mirror.obs(obs[0]), atol=2e-2)
