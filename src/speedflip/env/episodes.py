"""Per-episode statistics: ``[K, C]`` counters updated every step, read out when an arena's episode ends.

Every count is *per agent*: the mean over the arena's cars of that car's count during the episode.
Counters are arrays over all arenas and cars; a step costs a few dozen numpy operations on ``[K, C]``
arrays and no Python loop (the only per-arena work is building the dict of a finished episode).

Fields (:data:`EPISODE_METRICS`), per episode:

- ``touches``: ball touches (RocketSim's ``hit last step`` flag, once per step at most).
- ``goals``, ``shots``, ``saves``, ``demos``: increase of RocketSim's per-car counters over the episode
  (``demos``: cars this car demolished; own goals are credited to nobody).
- ``air_fraction``: share of the agent's steps that ended with the car airborne (no wheel contact,
  not turtled, not demolished), sampled once per step (every ``tick_skip`` ticks).
- ``mean_speed``: mean car speed |v| in uu/s, sampled once per step.
- ``boost_used``: sum of per-step boost decreases (boost 0..100; a step with a demolition is skipped;
  boost picked up while boosting in the same step hides that much use).
- ``turtle_events``: times a car started lying on its roof near the floor (up_z < -0.7 and z < 300 uu),
  a car that starts the episode turtled included. An event lasts until the car is on its wheels again;
  a car that rolls over and back without landing continues the same event.
- ``recovery_rate``: the share of the arena's turtle events that ended with the car on its wheels (wheel
  contact, no longer turtled) before the episode ended (0 when there was no event).
- ``ticks_to_recover``: mean physics ticks (1/120 s) from an event's start to that recovery, over the
  recovered events (0 when none recovered); resolution ``tick_skip`` ticks.
- ``mechanics``: 1 when the episode started from the mechanics lane's mix, else 0.

:func:`episode_means` turns a list of these dicts into the iteration's chart values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from speedflip._types import Array
from speedflip.env import layout as L
from speedflip.env.arenas import GameArrays
from speedflip.env.rewards import TURTLE_UP_Z

EPISODE_METRICS = (
    "touches",
    "goals",
    "shots",
    "saves",
    "demos",
    "air_fraction",
    "mean_speed",
    "boost_used",
    "turtle_events",
    "recovery_rate",
    "ticks_to_recover",
    "mechanics",
)

TURTLE_MAX_Z = 300.0  # uu: a car on its roof counts as turtled below this height
COUNTER_COLUMNS = [L.CAR_GOALS, L.CAR_SHOTS, L.CAR_SAVES, L.CAR_DEMOS]
_UP_Z, _POS_Z = L.CAR_UP.start + 2, L.CAR_POS.start + 2
# the columns a step reads, gathered into one small contiguous array: demoed, on ground, boost, z, up_z, vel
_STEP_COLUMNS = [L.CAR_IS_DEMOED, L.CAR_ON_GROUND, L.CAR_BOOST, _POS_Z, _UP_Z, *range(L.CAR_VEL.start, L.CAR_VEL.stop)]


def turtled_cars(cars: Array) -> Array:
    """``[...]`` bool from car rows ``[..., 36]`` (world view): on the roof near the floor, not demolished.

    Turtled: ``up_z < -0.7`` and ``z < 300`` uu.
    """
    return _turtled(cars[..., _UP_Z], cars[..., _POS_Z], cars[..., L.CAR_IS_DEMOED] > 0.5)


def _turtled(up_z: Array, z: Array, demoed: Array) -> Array:
    out: Array = (up_z < TURTLE_UP_Z) & (z < TURTLE_MAX_Z) & ~demoed
    return out


class EpisodeTracker:
    """Counters of the running episode of every arena; see the module docstring for the fields."""

    def __init__(self, num_arenas: int, num_cars: int, tick_skip: int) -> None:
        K, C = num_arenas, num_cars
        self.num_cars = num_cars
        self.tick_skip = tick_skip
        self.steps = np.zeros(K, np.int64)
        self.ticks = np.zeros(K, np.int64)
        self.touches = np.zeros((K, C), np.int64)
        self.counters_start = np.zeros((K, C, len(COUNTER_COLUMNS)), np.float64)
        self.air_steps = np.zeros((K, C), np.int64)
        self.speed_sum = np.zeros((K, C), np.float64)
        self.boost_used = np.zeros((K, C), np.float64)
        self.turtle_events = np.zeros((K, C), np.int64)
        self.recoveries = np.zeros((K, C), np.int64)
        self.recover_ticks = np.zeros((K, C), np.int64)
        self.turtle_open = np.zeros((K, C), bool)  # an event that has not ended yet
        self.turtle_start = np.zeros((K, C), np.int64)  # episode tick the open event started at
        self.was_turtled = np.zeros((K, C), bool)
        self.mechanics = np.zeros(K, bool)

    def reset(self, ids: Array, state: GameArrays, mechanics: Array | None = None) -> None:
        """Start counting for arenas ``ids`` from their freshly reset ``state``.

        ``mechanics`` (``[len(ids)]`` bool): which of them started from the mechanics mix.
        """
        cars = state.cars[ids, :, 0]
        turtled = turtled_cars(cars)
        self.steps[ids] = 0
        self.ticks[ids] = 0
        self.touches[ids] = 0
        self.counters_start[ids] = cars[..., COUNTER_COLUMNS]
        self.air_steps[ids] = 0
        self.speed_sum[ids] = 0.0
        self.boost_used[ids] = 0.0
        self.turtle_events[ids] = turtled
        self.recoveries[ids] = 0
        self.recover_ticks[ids] = 0
        self.turtle_open[ids] = turtled
        self.turtle_start[ids] = 0
        self.was_turtled[ids] = turtled
        self.mechanics[ids] = False if mechanics is None else mechanics

    def step(self, state: GameArrays, prev_state: GameArrays, touched: Array) -> None:
        """Fold one step (``tick_skip`` ticks) of every arena into the counters.

        ``prev_state``: the state before the step (for boost decreases); ``touched``: ``[K, C]`` bool.
        """
        now = state.cars[:, :, 0][..., _STEP_COLUMNS]  # [K, C, 8]
        before = prev_state.cars[:, :, 0][..., [L.CAR_IS_DEMOED, L.CAR_BOOST]]
        self.steps += 1
        self.ticks += self.tick_skip
        self.touches += touched
        demoed = now[..., 0] > 0.5
        on_ground = now[..., 1] > 0.5
        turtled = _turtled(now[..., 4], now[..., 3], demoed)
        self.air_steps += ~(on_ground | turtled | demoed)
        vel = now[..., 5:]
        self.speed_sum += np.sqrt(np.einsum("kci,kci->kc", vel, vel))
        spent = before[..., 1].astype(np.float64) - now[..., 2]
        spent[(spent < 0.0) | demoed | (before[..., 0] > 0.5)] = 0.0
        self.boost_used += spent

        if turtled.any() or self.turtle_open.any():  # most steps have no turtled car: skip the bookkeeping
            started = turtled & ~self.was_turtled & ~self.turtle_open
            self.turtle_events += started
            self.turtle_start[started] = np.broadcast_to(self.ticks[:, None], started.shape)[started]
            self.turtle_open |= started
            recovered = self.turtle_open & on_ground & ~turtled
            self.recoveries += recovered
            self.recover_ticks += np.where(recovered, self.ticks[:, None] - self.turtle_start, 0)
            self.turtle_open &= ~(recovered | demoed)  # a demolition ends an event unrecovered
        self.was_turtled = turtled

    def finish(self, ids: Array, state: GameArrays) -> list[dict[str, float]]:
        """The statistics of the episodes of arenas ``ids`` that ended with ``state`` (before any reset)."""
        n, C = len(ids), self.num_cars
        counts = np.maximum(state.cars[ids, :, 0][..., COUNTER_COLUMNS] - self.counters_start[ids], 0.0)
        agent_steps = np.maximum(self.steps[ids], 1) * C
        events = self.turtle_events[ids].sum(axis=1).astype(np.float64)
        recovered = self.recoveries[ids].sum(axis=1).astype(np.float64)
        columns = {
            "touches": self.touches[ids].mean(axis=1),
            "goals": counts[..., 0].mean(axis=1),
            "shots": counts[..., 1].mean(axis=1),
            "saves": counts[..., 2].mean(axis=1),
            "demos": counts[..., 3].mean(axis=1),
            "air_fraction": self.air_steps[ids].sum(axis=1) / agent_steps,
            "mean_speed": self.speed_sum[ids].sum(axis=1) / agent_steps,
            "boost_used": self.boost_used[ids].mean(axis=1),
            "turtle_events": self.turtle_events[ids].mean(axis=1),
            "recovery_rate": np.divide(recovered, events, out=np.zeros(n), where=events > 0),
            "ticks_to_recover": np.divide(
                self.recover_ticks[ids].sum(axis=1), recovered, out=np.zeros(n), where=recovered > 0
            ),
            "mechanics": self.mechanics[ids].astype(np.float64),
        }
        rows = np.stack([np.asarray(columns[name], np.float64) for name in EPISODE_METRICS], axis=1).tolist()
        return [dict(zip(EPISODE_METRICS, row, strict=True)) for row in rows]


def episode_means(episodes: Sequence[Mapping[str, float]]) -> dict[str, float | None]:
    """Chart values over finished episodes: the mean of each of :data:`EPISODE_METRICS`, except

    - ``recovery_rate`` = sum(rate * turtle_events) / sum(turtle_events), i.e. recovered events over
      all events of the episodes (episodes without an event do not count);
    - ``ticks_to_recover`` = sum(ticks * recovered) / sum(recovered), with ``recovered = rate * events``.

    A value is ``None`` when no episode (or no event / recovery) backs it.
    """
    out: dict[str, float | None] = dict.fromkeys(EPISODE_METRICS)
    rows = [ep for ep in episodes if all(name in ep for name in EPISODE_METRICS)]
    if not rows:
        return out
    table = {name: np.array([ep[name] for ep in rows], np.float64) for name in EPISODE_METRICS}
    for name in EPISODE_METRICS:
        out[name] = float(table[name].mean())
    events = table["turtle_events"]
    recovered = table["recovery_rate"] * events
    out["recovery_rate"] = float(recovered.sum() / events.sum()) if events.sum() > 0 else None
    total = recovered.sum()
    out["ticks_to_recover"] = float((table["ticks_to_recover"] * recovered).sum() / total) if total > 0 else None
    return out
