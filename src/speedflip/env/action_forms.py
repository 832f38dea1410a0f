"""Action forms besides the lookup table, configurable tables, and state-aware action masks.

- ``continuous``: 8 raw controls per agent; analog ones clamped to [-1, 1], buttons pressed when > 0;
- ``multi_discrete``: 5 analog controls as bin indices (``bins`` evenly spaced values in [-1, 1]) and
  3 buttons as 0/1;
- the action mask (table form) is computed from the state and applied as a logit mask inside the
  policy; the environment never remaps an action.

The lookup table of a run is built in one place, :func:`table_for` (from an :class:`EnvConfig`) /
:func:`table_from_spec` (from its ``env.action_table`` setting, also as the plain dict a checkpoint's
``meta.json`` stores) / :func:`table_from_run_config` (from a checkpoint's whole stored config): the
in-process env, the collection workers, match and evaluation envs, pool opponents, watch and export
all go through it, so an action index means the same row everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from speedflip._types import Array
from speedflip.env import layout as L
from speedflip.env.actions import NUM_CONTROLS, ActionError, LookupTableAction, default_lookup_table
from speedflip.env.arenas import GameArrays

if TYPE_CHECKING:
    from speedflip.config import ActionTableConfig, EnvConfig

ANALOG = 5


def controls_from_continuous(actions: Array) -> Array:
    """``[N, 8]`` policy outputs -> controls (analog clipped, buttons pressed above 0)."""
    out = np.asarray(actions, np.float32).copy()
    out[:, :ANALOG] = np.clip(out[:, :ANALOG], -1.0, 1.0)
    out[:, ANALOG:] = (out[:, ANALOG:] > 0.0).astype(np.float32)
    return out


def controls_from_multi_discrete(actions: Array, bins: int) -> Array:
    """``[N, 8]`` integer actions -> controls: analog ``linspace(-1, 1, bins)[index]``, buttons 0/1."""
    values = np.linspace(-1.0, 1.0, bins, dtype=np.float32)
    a = np.asarray(actions, np.int64)
    if a.ndim != 2 or a.shape[1] != NUM_CONTROLS:
        raise ValueError(f"multi-discrete actions must have shape [N, {NUM_CONTROLS}], got {list(a.shape)}")
    if a[:, :ANALOG].min() < 0 or a[:, :ANALOG].max() >= bins or not np.isin(a[:, ANALOG:], (0, 1)).all():
        raise ValueError(f"multi-discrete actions out of range: analog bins 0..{bins - 1}, buttons 0/1")
    out = np.empty(a.shape, np.float32)
    out[:, :ANALOG] = values[a[:, :ANALOG]]
    out[:, ANALOG:] = a[:, ANALOG:]
    return out


def build_table(
    throttle: list[float], steer: list[float], torque: list[float], flips: bool = True, stalls: bool = False
) -> Array:
    """A lookup table from bins: ground rows (throttle x steer x boost x handbrake, boost only at full
    throttle) and aerial rows (pitch x yaw x roll from ``torque`` with boost; jump rows for flips in
    every pitch/roll direction; optional stall rows: jump with yaw and opposite roll).

    Rows that come out identical (e.g. an aerial yaw-only row and the ground row that steers the same
    way) are kept once, and the rows are sorted (``np.unique`` over rows), so the table depends only
    on the bins, not on the order they were given in.
    """
    rows: list[list[float]] = []
    for t in throttle:
        for s in steer:
            for boost in (0.0, 1.0):
                for handbrake in (0.0, 1.0):
                    if boost == 1.0 and t != max(throttle):
                        continue
                    rows.append([1.0 if boost else t, s, 0.0, s, 0.0, 0.0, boost, handbrake])
    for pitch in torque:
        for yaw in torque:
            for roll in torque:
                if pitch == yaw == roll == 0.0:
                    continue
                for boost in (0.0, 1.0):
                    rows.append([boost, yaw, pitch, yaw, roll, 0.0, boost, 0.0])
    if flips:
        for pitch in torque:
            for roll in torque:
                rows.append([0.0, 0.0, pitch, 0.0, roll, 1.0, 0.0, float(pitch != 0.0 or roll != 0.0)])
    if stalls:
        for side in (-1.0, 1.0):
            rows.append([0.0, side, 0.0, side, -side, 1.0, 0.0, 0.0])
    unique = np.unique(np.asarray(rows, np.float32), axis=0)
    return unique


def table_from_spec(spec: ActionTableConfig | Mapping[str, Any] | None) -> Array:
    """The lookup table of an ``env.action_table`` setting: ``None`` is the default 90-row table
    (:func:`~speedflip.env.actions.default_lookup_table`), bins (an :class:`ActionTableConfig` or the
    dict a checkpoint's config stores) go through :func:`build_table`."""
    if spec is None:
        return default_lookup_table()
    if isinstance(spec, Mapping):
        from pydantic import ValidationError

        from speedflip.config import ActionTableConfig

        try:
            spec = ActionTableConfig.model_validate(dict(spec))
        except ValidationError as err:
            raise ActionError(f"env.action_table is not a valid table setting: {err}") from None
    return build_table(spec.throttle, spec.steer, spec.torque, spec.flips, spec.stalls)


def table_for(env_cfg: EnvConfig) -> LookupTableAction:
    """The validated lookup table an environment built from ``env_cfg`` acts with (``env.action_table``
    or the default table). Every backend and every match env uses this."""
    return LookupTableAction(table_from_spec(env_cfg.action_table))


def table_from_run_config(config: Mapping[str, Any] | None) -> Array:
    """The table of a run from its stored config (a checkpoint's ``meta["config"]``, plain JSON data).

    A config without ``env.action_table`` (older checkpoints, or the default) gives the default table.
    """
    env = config.get("env") if isinstance(config, Mapping) else None
    spec = env.get("action_table") if isinstance(env, Mapping) else None
    return table_from_spec(spec if isinstance(spec, Mapping) else None)


def same_table(a: Array, b: Array) -> bool:
    """Whether two lookup tables are the same rows in the same order (an index means the same controls)."""
    return bool(a.shape == b.shape and np.array_equal(a, b))


def action_mask(state: GameArrays, car_teams: Array, table: Array) -> Array:
    """``[K * C, A]`` bool: rows that can do something in the current state.

    Boost rows need boost > 0; on the ground, aerial-only rows (pitch/roll torque without a jump)
    do nothing and are masked; the all-zero row is always allowed.
    """
    C = car_teams.shape[0]
    cars = state.cars[:, np.arange(C), car_teams].reshape(-1, state.cars.shape[-1])
    has_boost = cars[:, L.CAR_BOOST] > 0.0
    on_ground = cars[:, L.CAR_ON_GROUND] > 0.5
    uses_boost = table[:, 6] > 0
    air_only = ((table[:, 2] != 0) | (table[:, 4] != 0)) & (table[:, 5] == 0)
    neutral = np.all(table == 0.0, axis=1)
    mask = np.ones((cars.shape[0], table.shape[0]), bool)
    mask &= ~(uses_boost[None] & ~has_boost[:, None])
    mask &= ~(air_only[None] & on_ground[:, None])
    mask |= neutral[None]
    return mask
