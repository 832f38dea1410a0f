"""Lookup tables from bins (``env.action_table``): built by hand-checkable rules, built in one place."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from speedflip.config import ActionTableConfig, EnvConfig
from speedflip.env.action_forms import (
    build_table,
    same_table,
    table_for,
    table_from_run_config,
    table_from_spec,
)
from speedflip.env.actions import NUM_CONTROLS, ActionError, default_lookup_table, table_digest, validate_table
from speedflip.env.vec_env import RocketLeagueVecEnv

THREE = [-1.0, 0.0, 1.0]
CUSTOM = {"steer": THREE, "torque": THREE}  # the table of the bug report: 81 rows


def small_table() -> np.ndarray:
    return build_table(THREE, THREE, THREE, flips=True, stalls=False)


def test_size_of_a_small_table_by_hand() -> None:
    # ground: throttle -1 and 0 without boost: 2 x 3 steers x 2 handbrakes = 12;
    #         full throttle: 3 steers x 2 boost x 2 handbrakes = 12                        -> 24
    # aerial: 27 - 1 (all zero) pitch/yaw/roll combinations x 2 boost = 52, of which the 4 yaw-only
    #         rows (yaw +-1, boost 0/1) equal ground rows that steer the same way          -> 48 new
    # flips:  3 pitch x 3 roll jump rows                                                    -> 9
    table = small_table()
    assert table.shape == (24 + 48 + 9, NUM_CONTROLS) == (81, 8)
    assert table.dtype == np.float32


def test_duplicates_are_removed_and_the_order_does_not_matter() -> None:
    table = small_table()
    assert len(np.unique(table, axis=0)) == len(table)
    # the yaw-only aerial row [0, 1, 0, 1, 0, 0, 0, 0] is also the ground row "steer right, no throttle"
    assert int(np.all(table == [0, 1, 0, 1, 0, 0, 0, 0], axis=1).sum()) == 1
    # the bins' order (and repeats) does not change the table: the config sorts them too
    shuffled = build_table([1.0, -1.0, 0.0], [0.0, 1.0, -1.0], [1.0, 0.0, -1.0])
    np.testing.assert_array_equal(shuffled, table)
    assert ActionTableConfig(steer=[1.0, 0.0, -1.0, 1.0]).steer == THREE


def test_every_row_is_in_range_with_a_neutral_row() -> None:
    for throttle, steer, torque, flips, stalls in [
        (THREE, THREE, THREE, True, False),
        ([-1.0, 0.0, 0.5, 1.0], [-1.0, -0.5, 0.0, 0.5, 1.0], [-1.0, 0.0, 1.0], True, True),
        ([0.0, 1.0], [-0.5, 0.0, 0.5], [-0.5, 0.0, 0.5], False, False),
    ]:
        table = build_table(throttle, steer, torque, flips, stalls)
        assert np.all(np.abs(table[:, :5]) <= 1.0)
        assert np.all(np.isin(table[:, 5:], (0.0, 1.0)))
        assert np.any(np.all(table == 0.0, axis=1)), "the neutral row (all controls 0) must be there"
        # boost only with full throttle; the analog values all come from the bins
        assert np.all(table[table[:, 6] == 1.0, 0] == 1.0)
        assert set(np.unique(table[:, 1])) <= set(steer) | set(torque)
        assert set(np.unique(table[:, 2])) <= set(torque)
        validate_table(table)  # what LookupTableAction checks


def test_flips_and_stalls_rows() -> None:
    no_flips = build_table(THREE, THREE, THREE, flips=False)
    assert len(small_table()) - len(no_flips) == 9 and not np.any(no_flips[:, 5] == 1.0)
    stalls = build_table(THREE, THREE, THREE, stalls=True)
    assert len(stalls) == 81 + 2
    for side in (-1.0, 1.0):
        assert np.any(np.all(stalls == [0, side, 0, side, -side, 1, 0, 0], axis=1))
    # a flip holds the handbrake; the plain jump (no direction) does not
    flips = small_table()[small_table()[:, 5] == 1.0]
    directional = (flips[:, 2] != 0) | (flips[:, 4] != 0)
    np.testing.assert_array_equal(flips[:, 7], directional.astype(np.float32))


def test_one_place_builds_the_table() -> None:
    default = default_lookup_table()
    assert same_table(table_from_spec(None), default) and len(default) == 90
    assert table_for(EnvConfig()).num_actions == 90
    custom = table_for(EnvConfig(action_table=CUSTOM))
    assert custom.num_actions == 81 and same_table(custom.table, small_table())
    # the plain dict a checkpoint's meta.json stores gives the same table
    stored = EnvConfig(action_table=CUSTOM).model_dump(mode="json")["action_table"]
    assert isinstance(stored, dict)
    assert same_table(table_from_spec(stored), custom.table)
    assert same_table(table_from_run_config({"env": {"action_table": stored}}), custom.table)
    for old in ({}, {"env": {}}, {"env": {"action_table": None}}, None):
        assert same_table(table_from_run_config(old), default)
    with pytest.raises(ActionError, match="not a valid table setting"):
        table_from_spec({"steer": [2.0]})
    assert table_digest(custom.table) == table_digest(small_table()) != table_digest(default)
    assert not same_table(custom.table, default)


@pytest.mark.parametrize("config", [None, CUSTOM])
def test_the_env_steps_every_row_of_its_table(config: dict[str, list[float]] | None) -> None:
    env = RocketLeagueVecEnv(EnvConfig(num_arenas=2, action_table=config), seed=0)
    try:
        expected = 90 if config is None else 81
        assert env.num_actions == env.actions.num_actions == expected
        env.reset()
        top = env.num_actions - 1
        result = env.step(np.full(env.num_agents, top))
        assert np.isfinite(result.obs).all()
        np.testing.assert_array_equal(env.prev_controls.reshape(-1, 8), np.repeat(env.actions.table[[top]], 4, 0))
        for first in range(0, env.num_actions, env.num_agents):
            env.step(np.arange(first, first + env.num_agents) % env.num_actions)
        with pytest.raises(ActionError, match=f"valid indices are 0..{top}"):
            env.step(np.full(env.num_agents, top + 1))
    finally:
        env.close()


def test_all_bins_combinations_validate() -> None:
    """Every small bins setting the config accepts gives a table LookupTableAction accepts."""
    options = [[-1.0, 0.0, 1.0], [-0.5, 0.0, 0.5], [-1.0, -0.5, 0.0, 0.5, 1.0]]
    for steer, torque in itertools.product(options, options):
        table = table_from_spec(ActionTableConfig(steer=steer, torque=torque))
        validate_table(table)
