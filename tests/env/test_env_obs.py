"""Observations: fixed size per team sizes, float32, and blue/orange mirror-symmetric at kickoff."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from speedflip.env import layout as L
from speedflip.env.obs import BALL_FEATURES, CAR_FEATURES, OTHER_EXTRA, POS_COEF, SELF_EXTRA, DefaultObs
from speedflip.env.vec_env import RocketLeagueVecEnv

SLOT = CAR_FEATURES + OTHER_EXTRA  # 25 floats per teammate / opponent slot
SELF_END = BALL_FEATURES + CAR_FEATURES + SELF_EXTRA  # 36


@pytest.mark.parametrize(
    ("blue", "orange", "dim"),
    [(1, 1, 103), (2, 2, 153), (1, 2, 153), (2, 1, 153), (1, 0, 103), (3, 3, 203)],
)
def test_obs_dim_by_team_sizes(blue: int, orange: int, dim: int) -> None:
    """9 + 27 + 25 * (m - 1) + 25 * m + 34 + 8 with m the larger team size, worked out by hand."""
    assert DefaultObs(blue, orange).obs_dim == dim


def mirror_partners(cars_xy: np.ndarray, blue: int) -> np.ndarray:
    """``partner[c]``: the car standing at car ``c``'s position rotated 180 degrees about z."""
    C = cars_xy.shape[0]
    partner = np.full(C, -1)
    for c in range(C):
        others = range(blue, C) if c < blue else range(blue)
        for o in others:
            if np.allclose(cars_xy[o], -cars_xy[c], atol=1e-2):
                partner[c] = o
    assert np.all(partner >= 0), f"every car has a mirrored partner: {cars_xy.tolist()}"
    assert np.array_equal(partner[partner], np.arange(C))
    return partner


def as_seen_by_partner(obs: np.ndarray, builder: DefaultObs, viewer: int, partner: np.ndarray) -> np.ndarray:
    """The observation of ``viewer``'s mirror partner, its slots reordered to ``viewer``'s slot order.

    RocketSim's kickoff pairs blue car i with *some* orange car (the pairing follows its internal
    car set, so it is not always orange car i); slot ``s`` of the viewer (car ``t``) corresponds to
    the partner's slot holding car ``partner[t]``. In 1v1 this is the identity.
    """
    m = int(partner[viewer])
    out = obs[m].copy()
    start = SELF_END
    for index in (builder.teammate_index, builder.opponent_index):
        for s in range(index.shape[1]):
            t = int(index[viewer, s])
            if t < 0:
                continue
            s2 = int(np.flatnonzero(index[m] == partner[t])[0])
            dst, src = start + s * SLOT, start + s2 * SLOT
            out[dst : dst + SLOT] = obs[m, src : src + SLOT]
        start += index.shape[1] * SLOT
    return out


@pytest.mark.parametrize(("blue", "seed"), [(1, 0), (1, 3), (2, 0), (2, 5), (3, 1)])
def test_kickoff_obs_mirror_symmetric(make_env: Callable[..., RocketLeagueVecEnv], blue: int, seed: int) -> None:
    """At a kickoff, each blue car and the orange car at its mirrored spot get the same observation.

    In 1v1 that is agent 0 and agent 1 of each arena, row for row.
    """
    env = make_env(seed=seed, num_arenas=2, blue_size=blue, orange_size=blue, state_setters={"kickoff": 1.0})
    obs = env.reset()
    C = 2 * blue
    assert obs.shape == (2 * C, env.obs_dim)
    assert obs.dtype == np.float32
    per_arena = obs.reshape(2, C, -1)
    for k in range(2):
        partner = mirror_partners(env.state.cars[k, :, 0, L.CAR_POS][:, :2], blue)
        for c in range(C):
            expected = as_seen_by_partner(per_arena[k], env.obs_builder, c, partner)
            np.testing.assert_allclose(per_arena[k, c], expected, atol=1e-5, err_msg=f"arena {k} car {c}")
    if blue == 1:
        np.testing.assert_allclose(per_arena[:, 0], per_arena[:, 1], atol=1e-5)
    # the ball is at the centre, ahead of every car: positive y relative to each car, in its own view
    assert np.all(per_arena[:, :, 9 + 18 + 1] > 0.0)


def test_obs_stay_symmetric_under_mirrored_actions(make_env: Callable[..., RocketLeagueVecEnv]) -> None:
    """Each orange car doing what its blue mirror partner does keeps both seeing the same game (2v2)."""
    env = make_env(seed=1, num_arenas=2, blue_size=2, orange_size=2, state_setters={"kickoff": 1.0})
    first = env.reset()
    partners = [mirror_partners(env.state.cars[k, :, 0, L.CAR_POS][:, :2], 2) for k in range(2)]
    rng = np.random.default_rng(0)
    for _ in range(10):
        actions = np.zeros((2, 4), np.int64)
        for k in range(2):
            actions[k, :2] = rng.integers(0, env.num_actions, size=2)
            actions[k, partners[k][:2]] = actions[k, :2]
        res = env.step(actions.ravel())
        per_arena = res.obs.reshape(2, 4, -1)
        for k in range(2):
            for c in range(4):
                expected = as_seen_by_partner(per_arena[k], env.obs_builder, c, partners[k])
                np.testing.assert_allclose(per_arena[k, c], expected, atol=1e-4)
    assert not np.allclose(res.obs, first, atol=1e-3), "the cars actually moved"


def test_uneven_teams_share_obs_size_and_pad_empty_slot(make_env: Callable[..., RocketLeagueVecEnv]) -> None:
    """1v2: every agent gets 153 floats; the lone blue car's teammate slot is zeros, orange's is filled."""
    env = make_env(num_arenas=2, blue_size=1, orange_size=2, state_setters={"kickoff": 1.0})
    obs = env.reset().reshape(2, 3, -1)
    assert obs.shape == (2, 3, 153)
    assert obs.dtype == np.float32
    teammate = obs[:, :, SELF_END : SELF_END + SLOT]
    assert np.all(teammate[:, 0] == 0.0), "blue has no teammate: padded with zeros, 'present' flag 0"
    assert np.all(teammate[:, 1:, -1] == 1.0), "orange cars have a teammate: 'present' flag 1"
    opponents = obs[:, :, SELF_END + SLOT : SELF_END + 3 * SLOT].reshape(2, 3, 2, SLOT)
    assert np.all(opponents[:, 0, :, -1] == 1.0), "blue sees two opponents"
    assert np.all(opponents[:, 1:, 0, -1] == 1.0), "orange sees the one blue car"
    assert np.all(opponents[:, 1:, 1] == 0.0), "orange's second opponent slot is empty"
    res = env.step(np.zeros(6, np.int64))
    assert res.obs.shape == (6, 153)


def test_obs_content_matches_state_by_hand(make_env: Callable[..., RocketLeagueVecEnv]) -> None:
    """Spot-check the layout: ball, own position, previous controls, boost pads, own view for orange."""
    env = make_env(num_arenas=1, blue_size=1, orange_size=1, state_setters={"kickoff": 1.0})
    obs = env.reset()
    st = env.state
    for agent, p in ((0, 0), (1, 1)):
        o = obs[agent]
        np.testing.assert_allclose(o[0:3], st.ball[0, p, L.BALL_POS] * POS_COEF, atol=1e-6)
        np.testing.assert_allclose(o[9:12], st.cars[0, agent, p, L.CAR_POS] * POS_COEF, atol=1e-6)
        assert o[9 + 15] == pytest.approx(st.cars[0, agent, p, L.CAR_BOOST] / 100.0)
        np.testing.assert_array_equal(o[-8:], 0.0)  # no controls yet
        np.testing.assert_array_equal(o[-42:-8], 1.0)  # all 34 boost pads active at kickoff
    # both cars start at own y < 0: orange from its own side too
    assert obs[0, 10] < 0 and obs[1, 10] < 0
    action = 18  # a full-throttle boost row
    res = env.step(np.array([action, 8]))
    np.testing.assert_array_equal(res.obs[0, -8:], env.actions.table[action])
    np.testing.assert_array_equal(res.obs[1, -8:], env.actions.table[8])
