"""Episode metrics on hand-built states: every value computed by hand from a few scripted steps."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import pytest

from speedflip.collect.shared import EPISODE_FIELDS
from speedflip.env import layout as L
from speedflip.env.arenas import GameArrays
from speedflip.env.episodes import EPISODE_METRICS, EpisodeTracker, episode_means, turtled_cars

TICK_SKIP = 8


def _state(num_arenas: int = 2, num_cars: int = 2) -> GameArrays:
    """Every car upright on the floor at rest (up = +z, z = 17), 50 boost, no counters."""
    st = GameArrays.empty(num_arenas, num_cars)
    cars = st.cars[:, :, 0]
    cars[..., L.CAR_UP] = [0.0, 0.0, 1.0]
    cars[..., L.CAR_POS] = [0.0, 0.0, L.CAR_REST_Z]
    cars[..., L.CAR_ON_GROUND] = 1.0
    cars[..., L.CAR_BOOST] = 50.0
    return st


def _turtle(st: GameArrays, k: int, c: int) -> None:
    car = st.cars[k, c, 0]
    car[L.CAR_UP] = [0.0, 0.0, -1.0]
    car[L.CAR_POS.start + 2] = 40.0
    car[L.CAR_ON_GROUND] = 0.0


def _upright(st: GameArrays, k: int, c: int) -> None:
    car = st.cars[k, c, 0]
    car[L.CAR_UP] = [0.0, 0.0, 1.0]
    car[L.CAR_POS.start + 2] = L.CAR_REST_Z
    car[L.CAR_ON_GROUND] = 1.0


class Episode:
    """Feeds hand-built states to a tracker: ``advance(change)`` copies the last state, applies
    ``change`` to the copy and steps the tracker with it."""

    def __init__(self, start: GameArrays, mechanics: list[bool] | None = None) -> None:
        K, C = start.cars.shape[:2]
        self.tracker = EpisodeTracker(K, C, TICK_SKIP)
        self.state = start
        flags = None if mechanics is None else np.array(mechanics)
        self.tracker.reset(np.arange(K), start, flags)

    def advance(
        self, change: Callable[[GameArrays], None] | None = None, touched: list[list[bool]] | None = None
    ) -> None:
        before, after = self.state, self.state.copy()
        if change is not None:
            change(after)
        K, C = after.cars.shape[:2]
        hits = np.zeros((K, C), bool) if touched is None else np.array(touched)
        self.tracker.step(after, before, hits)
        self.state = after

    def finish(self, ids: list[int]) -> list[dict[str, float]]:
        return self.tracker.finish(np.array(ids), self.state)


def test_turtled_cars_rule() -> None:
    """Turtled: up_z < -0.7 and z < 300, not demolished."""
    cars = np.zeros((5, L.CAR_WIDTH), np.float32)
    cars[:, L.CAR_UP.start + 2] = [-1.0, -0.69, -0.8, -1.0, -1.0]
    cars[:, L.CAR_POS.start + 2] = [40.0, 40.0, 299.0, 301.0, 40.0]
    cars[4, L.CAR_IS_DEMOED] = 1.0
    assert turtled_cars(cars).tolist() == [True, False, True, False, False]


def test_counts_speed_air_and_boost() -> None:
    """Arena 0 over 3 steps; arena 1 idles (all zeros but air = 0).

    car 0: on the floor at (300, 400, 0) uu/s = 500 uu/s; boost 50 -> 40 -> 45 (pad) -> 30: used 10 + 15 = 25;
           goals 0 -> 1, shots 2 -> 3; touches on steps 1 and 3.
    car 1: airborne at (0, 0, -100) = 100 uu/s; boost 50 all along; saves 0 -> 1, demos 1 -> 3.
    Per agent: touches (2 + 0) / 2 = 1, goals 0.5, shots 0.5, saves 0.5, demos 1, air 3 / 6 = 0.5,
    mean speed (3 * 500 + 3 * 100) / 6 = 300, boost used 25 / 2 = 12.5.
    """
    start = _state()
    start.cars[0, 0, 0, L.CAR_SHOTS] = 2.0
    start.cars[0, 1, 0, L.CAR_DEMOS] = 1.0
    ep = Episode(start)

    def step1(st: GameArrays) -> None:
        st.cars[0, 0, 0, L.CAR_VEL] = [300.0, 400.0, 0.0]
        st.cars[0, 0, 0, L.CAR_BOOST] = 40.0
        st.cars[0, 1, 0, L.CAR_VEL] = [0.0, 0.0, -100.0]
        st.cars[0, 1, 0, L.CAR_ON_GROUND] = 0.0
        st.cars[0, 1, 0, L.CAR_POS.start + 2] = 500.0

    def step2(st: GameArrays) -> None:
        st.cars[0, 0, 0, L.CAR_BOOST] = 45.0
        st.cars[0, 0, 0, L.CAR_GOALS] = 1.0
        st.cars[0, 1, 0, L.CAR_SAVES] = 1.0

    def step3(st: GameArrays) -> None:
        st.cars[0, 0, 0, L.CAR_BOOST] = 30.0
        st.cars[0, 0, 0, L.CAR_SHOTS] = 3.0
        st.cars[0, 1, 0, L.CAR_DEMOS] = 3.0

    ep.advance(step1, touched=[[True, False], [False, False]])
    ep.advance(step2)
    ep.advance(step3, touched=[[True, False], [False, False]])
    first, second = ep.finish([0, 1])
    assert first == {
        "touches": 1.0,
        "goals": 0.5,
        "shots": 0.5,
        "saves": 0.5,
        "demos": 1.0,
        "air_fraction": 0.5,
        "mean_speed": pytest.approx(300.0),
        "boost_used": 12.5,
        "turtle_events": 0.0,
        "recovery_rate": 0.0,
        "ticks_to_recover": 0.0,
        "mechanics": 0.0,
    }
    assert list(first) == list(EPISODE_METRICS)
    assert second == dict.fromkeys(EPISODE_METRICS, 0.0)


def test_turtle_events_recovery_and_ticks() -> None:
    """Arena 1, tick_skip 8. Car 0 turtles on step 1 (event at tick 8), stays on step 2 and is on its
    wheels on step 3 (tick 24): recovered after 16 ticks. Car 1 starts the episode turtled (event at
    tick 0) and never recovers. Per agent 1 event; rate 1 / 2; ticks to recover 16."""
    start = _state()
    _turtle(start, 1, 1)
    ep = Episode(start)
    ep.advance(lambda st: _turtle(st, 1, 0))
    ep.advance()
    ep.advance(lambda st: _upright(st, 1, 0))
    ep.advance()
    _, second = ep.finish([0, 1])
    assert second["turtle_events"] == 1.0
    assert second["recovery_rate"] == 0.5
    assert second["ticks_to_recover"] == 16.0


def test_rolling_over_and_back_is_one_event() -> None:
    """On the roof, rolled half over (up_z = 0, airborne) and back onto the roof without touching down
    on the wheels: one event; landing on the wheels 3 steps later closes it after 4 steps = 32 ticks."""
    ep = Episode(_state(1, 1))

    def half_over(st: GameArrays) -> None:
        st.cars[0, 0, 0, L.CAR_UP] = [0.0, 1.0, 0.0]
        st.cars[0, 0, 0, L.CAR_POS.start + 2] = 80.0

    ep.advance(lambda st: _turtle(st, 0, 0))  # tick 8: the event starts
    ep.advance(half_over)
    ep.advance(lambda st: _turtle(st, 0, 0))  # back on the roof: not a new event
    ep.advance()
    ep.advance(lambda st: _upright(st, 0, 0))  # tick 40
    (metrics,) = ep.finish([0])
    assert (metrics["turtle_events"], metrics["recovery_rate"], metrics["ticks_to_recover"]) == (1.0, 1.0, 32.0)


def test_a_second_turtle_after_recovering_is_a_new_event() -> None:
    ep = Episode(_state(1, 1))
    for change in (_turtle, _upright, _turtle, _upright, _turtle):
        ep.advance(partial(change, k=0, c=0))
    (metrics,) = ep.finish([0])
    assert metrics["turtle_events"] == 3.0
    assert metrics["recovery_rate"] == pytest.approx(2.0 / 3.0)
    assert metrics["ticks_to_recover"] == 8.0


def test_demolition_ends_a_turtle_unrecovered_and_hides_the_boost_reset() -> None:
    """A turtled car is demolished (boost 80 -> 0 while demolished, then respawned with 33): the event
    ends unrecovered and neither boost change counts as use."""
    start = _state(1, 1)
    start.cars[0, 0, 0, L.CAR_BOOST] = 80.0
    ep = Episode(start)

    def demolished(st: GameArrays) -> None:
        st.cars[0, 0, 0, L.CAR_IS_DEMOED] = 1.0
        st.cars[0, 0, 0, L.CAR_BOOST] = 0.0
        st.cars[0, 0, 0, L.CAR_ON_GROUND] = 0.0

    def respawned(st: GameArrays) -> None:
        _upright(st, 0, 0)
        st.cars[0, 0, 0, L.CAR_IS_DEMOED] = 0.0
        st.cars[0, 0, 0, L.CAR_BOOST] = 100.0 / 3.0

    ep.advance(lambda st: _turtle(st, 0, 0))
    ep.advance(demolished)
    ep.advance(respawned)
    (metrics,) = ep.finish([0])
    assert (metrics["turtle_events"], metrics["recovery_rate"], metrics["boost_used"]) == (1.0, 0.0, 0.0)
    assert metrics["air_fraction"] == 0.0, "neither a turtled nor a demolished car is airborne"


def test_reset_restarts_only_the_given_arenas() -> None:
    """Counters of arena 1 survive a reset of arena 0; a reset baseline is the counters at reset."""
    start = _state()
    ep = Episode(start, mechanics=[True, False])

    def scored(st: GameArrays) -> None:
        st.cars[:, 0, 0, L.CAR_GOALS] = 1.0

    ep.advance(scored, touched=[[True, True], [True, True]])
    ep.tracker.reset(np.array([0]), ep.state, np.array([False]))
    ep.advance()
    first, second = ep.finish([0, 1])
    assert (first["goals"], first["touches"], first["mechanics"]) == (0.0, 0.0, 0.0)
    assert (second["goals"], second["touches"], second["mechanics"]) == (0.5, 1.0, 0.0)
    assert Episode(start, mechanics=[True, False]).finish([0])[0]["mechanics"] == 1.0


def test_episode_means_pool_the_turtle_events() -> None:
    """Two episodes: 1 event, rate 1, 16 ticks; 3 events, rate 1/3 (1 recovered), 40 ticks; and one
    without events. Pooled rate (1 + 1) / 4 = 0.5, ticks (16 + 40) / 2 = 28; the rest plain means."""
    base = dict.fromkeys(EPISODE_METRICS, 0.0)
    episodes = [
        {**base, "turtle_events": 1.0, "recovery_rate": 1.0, "ticks_to_recover": 16.0, "touches": 2.0},
        {**base, "turtle_events": 3.0, "recovery_rate": 1.0 / 3.0, "ticks_to_recover": 40.0, "touches": 4.0},
        {**base, "touches": 0.0, "mechanics": 1.0},
    ]
    means = episode_means(episodes)
    assert means["recovery_rate"] == pytest.approx(0.5)
    assert means["ticks_to_recover"] == pytest.approx(28.0)
    assert means["touches"] == pytest.approx(2.0)
    assert means["turtle_events"] == pytest.approx(4.0 / 3.0)
    assert means["mechanics"] == pytest.approx(1.0 / 3.0)


def test_episode_means_without_data_are_none() -> None:
    assert episode_means([]) == dict.fromkeys(EPISODE_METRICS)
    means = episode_means([{**dict.fromkeys(EPISODE_METRICS, 0.0), "touches": 3.0}])
    assert means["touches"] == 3.0
    assert means["recovery_rate"] is None and means["ticks_to_recover"] is None


def test_the_collector_carries_every_metric() -> None:
    """The multi-process collector's shared-memory columns (spelled out so workers import no env code)."""
    assert EPISODE_FIELDS[4:] == EPISODE_METRICS
    assert EPISODE_FIELDS[:4] == ("return", "length_seconds", "touches_per_minute", "goal")
