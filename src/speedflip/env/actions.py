"""Lookup-table actions: one discrete index per agent -> 8 car controls.

Controls are ordered ``throttle, steer, pitch, yaw, roll, jump, boost, handbrake`` (RLGym's order).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import RocketSim as rsim

from speedflip._types import Array

CONTROL_NAMES = ("throttle", "steer", "pitch", "yaw", "roll", "jump", "boost", "handbrake")
NUM_CONTROLS = len(CONTROL_NAMES)


class ActionError(ValueError):
    """An action index or table that cannot be used."""


def default_lookup_table() -> Array:
    """The standard 90-row table: ground driving plus aerial control and flips.

    Ground rows: throttle x steer x boost x handbrake (boost only with full throttle).
    Aerial rows: pitch x yaw x roll x jump x boost; a jump row with a direction is a flip
    (yaw is left out of flips because roll already gives side flips); the handbrake is held
    on flips so that the car does not power-slide-steer out of them on landing.
    """
    rows: list[list[float]] = []
    for throttle in (-1.0, 0.0, 1.0):
        for steer in (-1.0, 0.0, 1.0):
            for boost in (0.0, 1.0):
                for handbrake in (0.0, 1.0):
                    if boost == 1.0 and throttle != 1.0:
                        continue
                    rows.append([throttle or boost, steer, 0.0, steer, 0.0, 0.0, boost, handbrake])
    for pitch in (-1.0, 0.0, 1.0):
        for yaw in (-1.0, 0.0, 1.0):
            for roll in (-1.0, 0.0, 1.0):
                for jump in (0.0, 1.0):
                    for boost in (0.0, 1.0):
                        if jump == 1.0 and yaw != 0.0:
                            continue
                        if pitch == roll == jump == 0.0:
                            continue
                        handbrake = float(jump == 1.0 and (pitch != 0.0 or yaw != 0.0 or roll != 0.0))
                        rows.append([boost, yaw, pitch, yaw, roll, jump, boost, handbrake])
    return np.asarray(rows, dtype=np.float32)


@dataclass(frozen=True)
class TableCoverage:
    """What a lookup table can do, printed at start so a user sees it."""

    num_actions: int
    throttle_values: tuple[float, ...]
    steer_values: tuple[float, ...]
    pitch_values: tuple[float, ...]
    yaw_values: tuple[float, ...]
    roll_values: tuple[float, ...]
    has_neutral: bool
    num_ground: int
    num_aerial: int
    num_flips: int

    def summary(self) -> str:
        def vals(v: tuple[float, ...]) -> str:
            return "/".join(f"{x:+g}" for x in v)

        return (
            f"{self.num_actions} actions ({self.num_ground} ground, {self.num_aerial} aerial, "
            f"{self.num_flips} jump/flip); throttle {vals(self.throttle_values)}, "
            f"steer {vals(self.steer_values)}, pitch {vals(self.pitch_values)}, "
            f"yaw {vals(self.yaw_values)}, roll {vals(self.roll_values)}"
        )


def validate_table(table: Array) -> TableCoverage:
    """Check a lookup table and report its coverage.

    A table must be ``[n, 8]``, finite, analog controls in [-1, 1], buttons 0 or 1, and must be able
    to steer, pitch, yaw and roll both ways; otherwise a bot trained on it cannot play.
    """
    if table.ndim != 2 or table.shape[1] != NUM_CONTROLS or table.shape[0] == 0:
        raise ActionError(
            f"action table must have shape [n_actions, {NUM_CONTROLS}] ({', '.join(CONTROL_NAMES)}), "
            f"got {list(table.shape)}"
        )
    if not np.all(np.isfinite(table)):
        raise ActionError("action table holds NaN or infinite values")
    if np.any(np.abs(table[:, :5]) > 1.0):
        raise ActionError("action table: throttle/steer/pitch/yaw/roll must lie in [-1, 1]")
    if not np.all(np.isin(table[:, 5:], (0.0, 1.0))):
        raise ActionError("action table: jump/boost/handbrake must be 0 or 1")
    for col in (1, 2, 3, 4):
        if not (np.any(table[:, col] > 0) and np.any(table[:, col] < 0)):
            raise ActionError(
                f"action table cannot {CONTROL_NAMES[col]} both ways: it needs rows with "
                f"{CONTROL_NAMES[col]} > 0 and < 0 for full coverage"
            )

    if not np.any(np.all(table == 0.0, axis=1)):
        raise ActionError(
            "action table has no neutral row (all eight controls 0): a bot must be able to do nothing; add one"
        )

    return table_coverage(table)


def coverage_fields(table: Array) -> dict[str, Any]:
    """The :class:`TableCoverage` fields of a table (no validation)."""

    def uniq(col: int) -> tuple[float, ...]:
        return tuple(float(v) for v in np.unique(table[:, col]))

    aerial = (table[:, 2] != 0) | (table[:, 4] != 0) | (table[:, 5] != 0)
    return {
        "num_actions": int(table.shape[0]),
        "throttle_values": uniq(0),
        "steer_values": uniq(1),
        "pitch_values": uniq(2),
        "yaw_values": uniq(3),
        "roll_values": uniq(4),
        "has_neutral": bool(np.any(np.all(table == 0.0, axis=1))),
        "num_ground": int((~aerial).sum()),
        "num_aerial": int(aerial.sum()),
        "num_flips": int((table[:, 5] == 1).sum()),
    }


def table_digest(table: Array) -> str:
    """A short fingerprint of a table's rows (shape and float32 values): equal digests, same table."""
    arr = np.ascontiguousarray(table, dtype=np.float32)
    h = hashlib.sha256(f"{arr.shape}".encode())
    h.update(arr.tobytes())
    return h.hexdigest()[:16]


def table_coverage(table: Array) -> TableCoverage:
    """What a table covers (no validation; :func:`validate_table` checks first)."""
    return TableCoverage(**coverage_fields(table))


class LookupTableAction:
    """Maps action indices to RocketSim controls; validates the table at construction."""

    def __init__(self, table: Array | None = None) -> None:
        self.table = np.ascontiguousarray(default_lookup_table() if table is None else table, dtype=np.float32)
        self.coverage = validate_table(self.table)
        self.controls = [self._to_controls(row) for row in self.table]

    @property
    def num_actions(self) -> int:
        return int(self.table.shape[0])

    @staticmethod
    def _to_controls(row: Array) -> rsim.CarControls:
        return rsim.CarControls(
            throttle=float(row[0]),
            steer=float(row[1]),
            pitch=float(row[2]),
            yaw=float(row[3]),
            roll=float(row[4]),
            jump=bool(row[5]),
            boost=bool(row[6]),
            handbrake=bool(row[7]),
        )

    def check(self, actions: Array, num_agents: int) -> Array:
        """Validate a batch of action indices; returns them as int64."""
        arr = np.asarray(actions)
        if arr.shape != (num_agents,):
            raise ActionError(f"expected {num_agents} action indices (one per agent), got shape {list(arr.shape)}")
        if not np.issubdtype(arr.dtype, np.integer) and not np.all(np.mod(arr, 1) == 0):
            raise ActionError(f"action indices must be integers, got dtype {arr.dtype}")
        arr = arr.astype(np.int64, copy=False)
        bad = (arr < 0) | (arr >= self.num_actions)
        if np.any(bad):
            first = int(np.flatnonzero(bad)[0])
            raise ActionError(
                f"action index {int(arr[first])} for agent {first} is out of range: "
                f"valid indices are 0..{self.num_actions - 1}"
            )
        return arr

    def parse(self, actions: Array) -> Array:
        """Action indices ``[n]`` -> controls ``[n, 8]`` (float32)."""
        return self.table[np.asarray(actions, dtype=np.int64)]
