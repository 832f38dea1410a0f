"""Lookup-table actions: every index reaches the car as the table row says; bad input is refused."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from speedflip.env.actions import (
    CONTROL_NAMES,
    ActionError,
    LookupTableAction,
    default_lookup_table,
    validate_table,
)
from speedflip.env.arenas import Arenas
from speedflip.env.vec_env import RocketLeagueVecEnv


def _controls_tuple(controls: object) -> list[float]:
    return [float(getattr(controls, name)) for name in CONTROL_NAMES]


def test_every_row_reaches_the_car_through_arenas_step(lookup: LookupTableAction) -> None:
    """For each action index, after ``Arenas.step`` the car's RocketSim controls equal that table row."""
    arenas = Arenas(num_arenas=1, blue_size=1, orange_size=1, tick_skip=2, action_delay_ticks=1)
    arenas.arenas[0].reset_kickoff(seed=0)
    n = lookup.num_actions
    for i in range(n):
        j = n - 1 - i  # the orange car walks the table backwards so both cars get different rows
        arenas.step(np.array([i, j]), lookup.controls)
        for car, idx in zip(arenas.cars[0], (i, j), strict=True):
            got = _controls_tuple(car.get_controls())
            assert got == lookup.table[idx].tolist(), f"action {idx}: car got {got}"


def test_custom_table_columns_reach_the_right_controls() -> None:
    """With a table whose columns all differ (the default has yaw == steer), no control is mixed up."""
    table = np.array(
        [
            [0.5, -1.0, 0.25, 1.0, -0.75, 1, 0, 1],
            [-1.0, 1.0, -1.0, -0.5, 1.0, 0, 1, 0],
            [0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0],
        ],
        np.float32,
    )
    custom = LookupTableAction(table)
    arenas = Arenas(num_arenas=2, blue_size=1, orange_size=1, tick_skip=4, action_delay_ticks=0)
    arenas.step(np.array([0, 1, 2, 0]), custom.controls)
    for (k, c), idx in zip([(0, 0), (0, 1), (1, 0), (1, 1)], [0, 1, 2, 0], strict=True):
        assert _controls_tuple(arenas.cars[k][c].get_controls()) == table[idx].tolist()


def test_default_table_content() -> None:
    """The default table has the documented 90 rows: 24 ground rows, neutral included, no duplicates."""
    table = default_lookup_table()
    assert table.shape == (90, 8)
    assert table.dtype == np.float32
    assert len({tuple(r) for r in table.tolist()}) == 90, "duplicate rows"
    cov = validate_table(table)
    assert cov.num_actions == 90
    assert cov.has_neutral
    assert cov.num_ground == 24  # 3 throttle x 3 steer x 2 handbrake + 3 steer x 2 handbrake with boost
    assert cov.num_aerial == 66
    for values in (cov.throttle_values, cov.steer_values, cov.pitch_values, cov.yaw_values, cov.roll_values):
        assert values == (-1.0, 0.0, 1.0)
    # boost only comes with full throttle
    assert np.all(table[table[:, 6] == 1.0, 0] == 1.0)


def test_parse_maps_indices_to_rows(lookup: LookupTableAction) -> None:
    idx = np.array([0, 17, 89, 17])
    np.testing.assert_array_equal(lookup.parse(idx), lookup.table[idx])


@pytest.mark.parametrize("bad", [-1, 90])
def test_check_rejects_out_of_range_index(lookup: LookupTableAction, bad: int) -> None:
    """An out-of-range index raises ActionError naming the index and the agent."""
    actions = np.array([3, bad, 5])
    with pytest.raises(ActionError, match=rf"action index {bad} for agent 1 is out of range"):
        lookup.check(actions, 3)


@pytest.mark.parametrize("shape", [(2,), (4,), (3, 1), (1, 3), ()])
def test_check_rejects_wrong_shape(lookup: LookupTableAction, shape: tuple[int, ...]) -> None:
    with pytest.raises(ActionError, match="expected 3 action indices"):
        lookup.check(np.zeros(shape, np.int64), 3)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("values", [[0.0, 1.5, 2.0], [0.0, np.nan, 1.0], [0.0, 1.0, np.inf]])
def test_check_rejects_non_integer_floats(lookup: LookupTableAction, values: list[float]) -> None:
    with pytest.raises(ActionError, match="integers"):
        lookup.check(np.array(values), 3)


def test_check_accepts_integer_valued_input(lookup: LookupTableAction) -> None:
    """Integer-valued floats and any integer dtype pass and come back as int64."""
    out = lookup.check(np.array([0.0, 89.0, 5.0]), 3)
    assert out.dtype == np.int64
    assert out.tolist() == [0, 89, 5]
    assert lookup.check(np.array([1, 2, 3], np.int32), 3).dtype == np.int64


def test_env_step_validates_actions(make_env: Callable[..., RocketLeagueVecEnv]) -> None:
    """The env refuses bad actions before any physics runs."""
    env = make_env(num_arenas=1, blue_size=1, orange_size=1, state_setters={"kickoff": 1.0})
    env.reset()
    ticks = env.arenas.arenas[0].tick_count
    with pytest.raises(ActionError, match="action index 90"):
        env.step(np.array([0, 90]))
    with pytest.raises(ActionError):
        env.step(np.array([0]))
    assert env.arenas.arenas[0].tick_count == ticks


def _table_with(change: tuple[int, int, float]) -> np.ndarray:
    table = default_lookup_table()
    row, col, value = change
    table[row, col] = value
    return table


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (np.zeros((90, 7), np.float32), "shape"),
        (np.zeros((0, 8), np.float32), "shape"),
        (np.zeros(8, np.float32), "shape"),
        (np.zeros((2, 90, 8), np.float32), "shape"),
        (_table_with((5, 0, np.nan)), "NaN"),
        (_table_with((5, 3, np.inf)), "NaN or infinite"),
        (_table_with((5, 0, 1.5)), r"\[-1, 1\]"),
        (_table_with((5, 4, -1.01)), r"\[-1, 1\]"),
        (_table_with((5, 5, 0.5)), "0 or 1"),
        (_table_with((5, 6, -1.0)), "0 or 1"),
        (_table_with((5, 7, 2.0)), "0 or 1"),
    ],
)
def test_validate_table_rejects_bad_tables(table: np.ndarray, message: str) -> None:
    with pytest.raises(ActionError, match=message):
        validate_table(table)
    with pytest.raises(ActionError):
        LookupTableAction(table)


@pytest.mark.parametrize("col", [1, 2, 3, 4])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_validate_table_requires_both_directions(col: int, sign: float) -> None:
    """A table that can only steer (pitch, yaw, roll) one way is refused, naming the control."""
    table = default_lookup_table()
    column = table[:, col]
    table[:, col] = np.where(column * sign < 0, 0.0, column)  # drop one direction
    with pytest.raises(ActionError, match=f"cannot {CONTROL_NAMES[col]} both ways"):
        validate_table(table)


def test_minimal_valid_table() -> None:
    """A three-row table that can do everything both ways, with a neutral row, is accepted and summarised."""
    table = np.array(
        [[1, 1, 1, 1, 1, 1, 1, 1], [-1, -1, -1, -1, -1, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0]],
        np.float32,
    )
    cov = LookupTableAction(table).coverage
    assert cov.num_actions == 3
    assert cov.has_neutral
    assert cov.num_flips == 1
    assert "3 actions" in cov.summary()


def test_table_without_neutral_row_is_refused() -> None:
    """A bot must be able to do nothing: a table without an all-zero row is an error that says so."""
    table = np.array([[1, 1, 1, 1, 1, 1, 1, 1], [-1, -1, -1, -1, -1, 0, 0, 0]], np.float32)
    with pytest.raises(ActionError, match="no neutral row"):
        validate_table(table)
