"""Arenas stepping: the one-tick action delay, thread-count independence, argument checks."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import RocketSim as rsim

from speedflip.env import layout as L
from speedflip.env.actions import CONTROL_NAMES, LookupTableAction
from speedflip.env.arenas import Arenas, GameArrays
from speedflip.env.vec_env import RocketLeagueVecEnv


def _kickoff_arenas(delay: int, tick_skip: int = 8) -> Arenas:
    arenas = Arenas(num_arenas=1, blue_size=1, orange_size=0, tick_skip=tick_skip, action_delay_ticks=delay)
    arenas.arenas[0].reset_kickoff(seed=0)
    arenas.read_all()
    return arenas


def _speed(state: GameArrays) -> float:
    return float(np.linalg.norm(state.cars[0, 0, 0, L.CAR_VEL]))


def test_action_delay_holds_previous_controls_for_one_tick(
    lookup: LookupTableAction, ground_row: Callable[..., int]
) -> None:
    """From rest, one throttle step moves the car less with a one-tick delay than without it.

    The delayed step must equal, exactly, one tick of the old (neutral) controls followed by
    tick_skip - 1 ticks of the new ones, done by hand on a twin arena.
    """
    gas = ground_row(1.0, 0.0, boost=1.0)
    idle = ground_row(0.0, 0.0)
    delayed, direct = _kickoff_arenas(1), _kickoff_arenas(0)
    start = delayed.state.cars[0, 0, 0, L.CAR_POS].copy()
    s_delayed = _speed(delayed.step(np.array([gas]), lookup.controls))
    s_direct = _speed(direct.step(np.array([gas]), lookup.controls))
    assert 0.0 < s_delayed < s_direct
    moved_delayed = np.linalg.norm(delayed.state.cars[0, 0, 0, L.CAR_POS] - start)
    moved_direct = np.linalg.norm(direct.state.cars[0, 0, 0, L.CAR_POS] - start)
    assert moved_delayed < moved_direct

    twin = _kickoff_arenas(0)
    twin.step_physics_only(1)  # one tick of neutral controls
    twin.cars[0][0].set_controls(lookup.controls[gas])
    twin.step_physics_only(7)
    np.testing.assert_array_equal(twin.read_all().cars, delayed.state.cars)

    # next step: releasing the throttle still accelerates for the first, delayed tick
    delayed.step(np.array([idle]), lookup.controls)
    twin.step_physics_only(1)
    twin.cars[0][0].set_controls(lookup.controls[idle])
    twin.step_physics_only(7)
    np.testing.assert_array_equal(twin.read_all().cars, delayed.state.cars)


def test_no_delay_matches_plain_ticks(lookup: LookupTableAction, ground_row: Callable[..., int]) -> None:
    """With action_delay_ticks=0 the controls apply from the first tick of the step."""
    gas = ground_row(1.0, -1.0)
    direct, twin = _kickoff_arenas(0), _kickoff_arenas(0)
    direct.step(np.array([gas]), lookup.controls)
    twin.cars[0][0].set_controls(lookup.controls[gas])
    twin.step_physics_only(8)
    np.testing.assert_array_equal(twin.read_all().cars, direct.state.cars)
    assert direct.arenas[0].tick_count == twin.arenas[0].tick_count


def test_release_controls_is_neutral(lookup: LookupTableAction, ground_row: Callable[..., int]) -> None:
    arenas = _kickoff_arenas(1)
    arenas.step(np.array([ground_row(1.0, 1.0, boost=1.0, handbrake=1.0)]), lookup.controls)
    arenas.release_controls(0)
    controls = arenas.cars[0][0].get_controls()
    assert [float(getattr(controls, name)) for name in CONTROL_NAMES] == [0.0] * 8


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_arenas": 0}, "num_arenas"),
        ({"tick_skip": 8, "action_delay_ticks": 8}, "action_delay_ticks"),
        ({"tick_skip": 4, "action_delay_ticks": -1}, "action_delay_ticks"),
    ],
)
def test_arenas_reject_bad_arguments(kwargs: dict[str, int], message: str) -> None:
    args = {"num_arenas": 1, "blue_size": 1, "orange_size": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        Arenas(**args)


def test_tick_skip_one_with_delay_is_allowed(lookup: LookupTableAction, ground_row: Callable[..., int]) -> None:
    """tick_skip 1 with a one-tick delay: the new controls only act on the next step."""
    arenas, twin = _kickoff_arenas(1, tick_skip=1), _kickoff_arenas(1, tick_skip=1)
    gas = np.array([ground_row(1.0, 0.0, boost=1.0)])
    arenas.step(gas, lookup.controls)
    twin.step_physics_only(1)  # the car only settles on its wheels: same as doing nothing
    np.testing.assert_array_equal(arenas.state.cars, twin.read_all().cars)
    arenas.step(gas, lookup.controls)
    twin.step_physics_only(1)
    assert _speed(arenas.state) > _speed(twin.read_all()) + 1.0


def _run(make_env: Callable[..., RocketLeagueVecEnv], num_threads: int) -> list[GameArrays]:
    env = make_env(
        seed=7,
        num_threads=num_threads,
        num_arenas=4,
        blue_size=2,
        orange_size=2,
        timeout_seconds=1.0,  # resets inside the 20 steps too
        state_setters={"kickoff": 0.5, "random": 0.5},
    )
    assert env.arenas.num_threads == num_threads
    env.reset()
    rng = np.random.default_rng(123)
    states = []
    for _ in range(20):
        env.step(rng.integers(0, env.num_actions, size=env.num_agents))
        states.append(env.state.copy())
    return states


def test_threads_do_not_change_results(make_env: Callable[..., RocketLeagueVecEnv]) -> None:
    """Same seed and actions: 1 and 2 physics threads give bit-identical states after every step."""
    one, two = _run(make_env, 1), _run(make_env, 2)
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a.ball, b.ball)
        np.testing.assert_array_equal(a.cars, b.cars)
        np.testing.assert_array_equal(a.pads, b.pads)
        np.testing.assert_array_equal(a.scores, b.scores)
    assert not np.array_equal(one[0].cars, one[-1].cars), "the cars moved"


def test_set_state_then_read_reflects_it() -> None:
    """read_all exports exactly what was set on the RocketSim objects, without stepping."""
    arenas = Arenas(num_arenas=2, blue_size=1, orange_size=1)
    car = rsim.CarState()
    car.pos = rsim.Vec(100.0, 200.0, 300.0)
    car.vel = rsim.Vec(10.0, -20.0, 30.0)
    car.boost = 55.0
    arenas.cars[1][1].set_state(car)
    st = arenas.read_all()
    np.testing.assert_allclose(st.cars[1, 1, 0, L.CAR_POS], [100.0, 200.0, 300.0])
    np.testing.assert_allclose(st.cars[1, 1, 0, L.CAR_VEL], [10.0, -20.0, 30.0])
    assert st.cars[1, 1, 0, L.CAR_BOOST] == pytest.approx(55.0)
    assert not np.allclose(st.cars[0, 1, 0, L.CAR_POS], [100.0, 200.0, 300.0])


def _respawned_x(seed: int, num_arenas: int = 6) -> list[float]:
    """Demolish every car of ``num_arenas`` 1v1 arenas, step 4 s with neutral controls: each car's x after
    RocketSim respawned it (3 s after the demolition)."""
    arenas = Arenas(num_arenas=num_arenas, blue_size=1, orange_size=1, seed=seed)
    try:
        for cars in arenas.cars:
            for car in cars:
                car.demolish()
        st = arenas.read_all()
        assert np.all(st.cars[:, :, 0, L.CAR_IS_DEMOED] == 1.0)
        actions = np.zeros(arenas.num_arenas * arenas.num_cars, np.int64)
        for _ in range(60):  # 60 steps of 8 ticks: 4 s
            st = arenas.step(actions, [rsim.CarControls()])
        assert np.all(st.cars[:, :, 0, L.CAR_IS_DEMOED] == 0.0)
        blue_y, orange_y = st.cars[:, 0, 0, L.CAR_POS][:, 1], st.cars[:, 1, 0, L.CAR_POS][:, 1]
        assert np.allclose(blue_y, -4608.0, atol=5.0) and np.allclose(orange_y, 4608.0, atol=5.0)  # behind its goal
        return [float(x) for x in st.cars[:, :, 0, L.CAR_POS][..., 0].reshape(-1)]
    finally:
        arenas.close()


def test_a_demolished_car_respawns_where_the_seed_says() -> None:
    """RocketSim picks a demolished car's respawn spot with an unseeded random number; the arenas move it to a spot
    drawn from their own seeded generator: one seed, the same spots every time (12 cars); another seed, other
    spots. Every car ends on one of the four spots behind its own goal (orange's turned about z)."""
    first = _respawned_x(seed=3)
    assert [_respawned_x(seed=3) for _ in range(2)] == [first, first]
    spots = {-2688.0, -2304.0, 2304.0, 2688.0}
    assert all(min(abs(x - s) for s in spots) < 1.0 for x in first), first
    assert len({round(x) for x in first}) > 1  # not one spot for every car
    assert _respawned_x(seed=4) != first
