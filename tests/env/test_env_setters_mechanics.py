"""State setters on real RocketSim: turtled, wall, air dribble, flip reset, jump challenge, random_ground.

Each test resets an arena many times with one setter, checks where the cars and the ball are put, then
steps the physics a little with no input to check the setup really is what it claims (the car stays on
the wall, the ball rides on the roof, the wheels meet the ball, ...).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import RocketSim as rsim

from speedflip._types import Array
from speedflip.env import layout as L
from speedflip.env.arenas import Arenas, GameArrays
from speedflip.env.states import OTHER_CARS_MIN_DISTANCE, STATE_SETTERS, StateSetter

# Octane (RocketSim's default car): hitbox offset (13.8757, 0, 20.755), size (120.507, 86.6994, 38.6591)
HITBOX_OFFSET_X = 13.8757
ROOF = 20.755 + 38.6591 / 2  # 40.085 uu from the car's origin to its roof, along its up vector
CORNER_PLANE = 8064.0


@pytest.fixture
def arenas() -> Iterator[Arenas]:
    built = Arenas(num_arenas=1, blue_size=1, orange_size=1)
    yield built
    built.close()


def _reset(arenas: Arenas, setter: StateSetter, rng: np.random.Generator) -> GameArrays:
    setter(arenas.arenas[0], arenas.cars[0], rng)
    arenas.release_controls(0)
    return arenas.read_all().copy()


def _idle(arenas: Arenas, ticks: int) -> GameArrays:
    arenas.arenas[0].step(ticks)
    return arenas.read_all().copy()


def _main_car(cars: Array, moved: Array) -> int:
    """The setup's main car: the waiting cars stand still at rest height."""
    index = np.flatnonzero(moved)
    assert index.size == 1, f"exactly one car is set up, got {index.tolist()}"
    return int(index[0])


def _inside(pos: Array, radius: float) -> bool:
    x, y, z = (float(v) for v in pos)
    return (
        abs(x) < L.SIDE_WALL_X - radius
        and abs(y) < L.BACK_WALL_Y - radius
        and abs(x) + abs(y) < CORNER_PLANE - radius * np.sqrt(2.0)
        and radius <= z + 1e-3 < L.CEILING_Z - radius
    )


@pytest.mark.parametrize("name", sorted(STATE_SETTERS))
def test_every_setter_keeps_everything_inside_the_field(name: str) -> None:
    """30 resets of a 3v3 arena: ball and cars inside the walls, corners and ceiling, nothing demolished."""
    arenas = Arenas(num_arenas=1, blue_size=3, orange_size=3)
    rng = np.random.default_rng(3)
    try:
        for _ in range(30):
            st = _reset(arenas, STATE_SETTERS[name], rng)
            assert _inside(st.ball[0, 0, L.BALL_POS], L.BALL_RADIUS - 2.0), st.ball[0, 0, L.BALL_POS]
            for car in st.cars[0, :, 0]:
                assert _inside(car[L.CAR_POS], 10.0), (name, car[L.CAR_POS])
                assert car[L.CAR_IS_DEMOED] == 0.0
            assert np.all(np.isfinite(st.cars)) and np.all(np.isfinite(st.ball))
    finally:
        arenas.close()


@pytest.mark.parametrize("name", sorted(STATE_SETTERS))
def test_every_setter_is_reproducible_from_its_rng(name: str) -> None:
    arenas = Arenas(num_arenas=2, blue_size=2, orange_size=2)
    try:
        for k in range(2):
            STATE_SETTERS[name](arenas.arenas[k], arenas.cars[k], np.random.default_rng(42))
        st = arenas.read_all()
        np.testing.assert_array_equal(st.cars[0], st.cars[1])
        np.testing.assert_array_equal(st.ball[0], st.ball[1])
    finally:
        arenas.close()


def test_turtled_cars_lie_on_their_roofs_and_stay_there() -> None:
    """2v2, 10 resets: every car upside down (up_z = -1) with its roof on the floor, 400+ uu apart; the
    ball rolls on the floor at <= 500 uu/s. Half a second without input changes nothing."""
    arenas = Arenas(num_arenas=1, blue_size=2, orange_size=2)
    rng = np.random.default_rng(0)
    try:
        for _ in range(10):
            st = _reset(arenas, STATE_SETTERS["turtled"], rng)
            cars = st.cars[0, :, 0]
            np.testing.assert_allclose(cars[:, L.CAR_UP], np.tile([0.0, 0.0, -1.0], (4, 1)), atol=1e-5)
            np.testing.assert_allclose(cars[:, L.CAR_POS][:, 2], ROOF + 1.0, atol=1e-3)
            np.testing.assert_array_equal(cars[:, L.CAR_VEL], 0.0)
            xy = cars[:, L.CAR_POS][:, :2]
            gaps = np.linalg.norm(xy[:, None] - xy[None], axis=-1) + np.eye(4) * 1e9
            assert gaps.min() >= 400.0
            ball = st.ball[0, 0]
            assert ball[L.BALL_POS][2] == pytest.approx(L.BALL_REST_Z, abs=1e-3)
            assert ball[L.BALL_VEL][2] == 0.0 and np.linalg.norm(ball[L.BALL_VEL]) <= 500.0 + 1e-2
            later = _idle(arenas, 60).cars[0, :, 0]
            assert np.all(later[:, L.CAR_UP][:, 2] < -0.95), "still on the roof"
            assert np.all(later[:, L.CAR_POS][:, 2] < ROOF + 5.0), "still on the floor"
            assert np.all(later[:, L.CAR_ON_GROUND] == 0.0), "no wheel touches the floor"
    finally:
        arenas.close()


def test_turtled_car_recovers_by_jumping(arenas: Arenas) -> None:
    """Pressing jump on the roof makes RocketSim flip the car back onto its wheels within 2 s."""
    rng = np.random.default_rng(1)
    _reset(arenas, STATE_SETTERS["turtled"], rng)
    _idle(arenas, 20)  # settle onto the roof first: the roll-over needs contact with the floor
    jump = rsim.CarControls()
    jump.jump = True
    for car in arenas.cars[0]:
        car.set_controls(jump)
    st = _idle(arenas, 240).cars[0, :, 0]
    assert np.all(st[:, L.CAR_UP][:, 2] > 0.9) and np.all(st[:, L.CAR_ON_GROUND] == 1.0)


def test_wall_car_sits_on_the_side_wall_with_the_ball_nearby(arenas: Arenas) -> None:
    """The main car's up vector is horizontal and points into the field from a side wall; its wheels
    keep touching the wall for the next 10 ticks. The ball is within 1000 uu along the car's heading,
    150..600 uu off the wall; the other car waits on the floor 1200+ uu away."""
    rng = np.random.default_rng(2)
    for _ in range(20):
        st = _reset(arenas, STATE_SETTERS["wall"], rng)
        cars = st.cars[0, :, 0]
        main = _main_car(cars, np.abs(cars[:, L.CAR_POS][:, 0]) > 4000.0)
        car, other = cars[main], cars[1 - main]
        side = np.sign(car[L.CAR_POS][0])
        assert car[L.CAR_POS][0] == pytest.approx(side * (L.SIDE_WALL_X - L.CAR_REST_Z), abs=1e-2)
        np.testing.assert_allclose(car[L.CAR_UP], [-side, 0.0, 0.0], atol=1e-5)
        assert 500.0 <= car[L.CAR_POS][2] <= 1500.0 and abs(car[L.CAR_POS][1]) <= 2800.0
        assert abs(car[L.CAR_VEL] @ car[L.CAR_UP]) < 1e-2, "moving along the wall"
        ball = st.ball[0, 0, L.BALL_POS]
        assert 150.0 - 1e-2 <= L.SIDE_WALL_X - abs(ball[0]) <= 600.0 + 1e-2 and np.sign(ball[0]) == side
        assert np.linalg.norm(ball - car[L.CAR_POS]) < 1000.0 + 600.0
        assert other[L.CAR_ON_GROUND] == 1.0 and other[L.CAR_POS][2] == pytest.approx(L.CAR_REST_Z)
        for point in (car[L.CAR_POS][:2], ball[:2]):
            assert np.linalg.norm(other[L.CAR_POS][:2] - point) >= OTHER_CARS_MIN_DISTANCE - 1e-3
        for _ in range(10):
            after = _idle(arenas, 1).cars[0, main, 0]
            assert after[L.CAR_ON_GROUND] == 1.0, "wheels on the wall"
            assert abs(after[L.CAR_UP][2]) < 0.1 and after[L.CAR_UP][0] * side < -0.99


def test_air_dribble_ball_rides_on_the_roof(arenas: Arenas) -> None:
    """The main car flies nose up towards the opponent goal; the ball sits 0..10 uu above its roof,
    centred over the hitbox, with the car's velocity, and the car pushes it within 0.2 s."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        st = _reset(arenas, STATE_SETTERS["air_dribble"], rng)
        cars = st.cars[0, :, 0]
        main = _main_car(cars, cars[:, L.CAR_POS][:, 2] > 100.0)
        car = cars[main]
        attack = 1.0 if main == 0 else -1.0  # blue is car 0
        forward, up = car[L.CAR_FORWARD], car[L.CAR_UP]
        assert car[L.CAR_ON_GROUND] == 0.0 and 150.0 <= car[L.CAR_POS][2] <= 1000.0 + 1e-3
        assert np.degrees(np.arcsin(forward[2])) == pytest.approx(25.0, abs=15.0 + 1e-3), "nose 10..40 degrees up"
        assert forward[1] * attack > np.cos(np.radians(45.0 + 1.0)) * np.linalg.norm(forward[:2])
        rel = st.ball[0, 0, L.BALL_POS] - (car[L.CAR_POS] + forward * HITBOX_OFFSET_X)
        assert ROOF + L.BALL_RADIUS - 0.05 <= rel @ up <= ROOF + L.BALL_RADIUS + 10.05
        assert np.linalg.norm(rel - up * (rel @ up)) < 0.05, "centred over the hitbox"
        np.testing.assert_allclose(st.ball[0, 0, L.BALL_VEL], car[L.CAR_VEL] - up * 50.0, atol=0.05)
        touched = False
        for _ in range(24):
            touched |= bool(_idle(arenas, 1).cars[0, main, 0, L.CAR_HIT_LAST_STEP])
        assert touched, "the car pushes the ball it carries"


def test_flip_reset_setup_wheels_meet_the_ball(arenas: Arenas) -> None:
    """The main car is below the ball, upside down enough (up_z <= -0.5), its up vector pointing away from
    the ball (wheels towards it) and closing in at 300..900 uu/s. Without input, its wheels touch the
    ball in the air (a flip reset: wheel contact above 250 uu) in most setups within 2 s."""
    rng = np.random.default_rng(4)
    resets, met = 20, 0
    for _ in range(resets):
        st = _reset(arenas, STATE_SETTERS["flip_reset"], rng)
        cars = st.cars[0, :, 0]
        main = _main_car(cars, cars[:, L.CAR_POS][:, 2] > 100.0)
        car, ball = cars[main], st.ball[0, 0]
        away = car[L.CAR_POS] - ball[L.BALL_POS]
        assert 250.0 - 20.0 <= np.linalg.norm(away) <= 550.0 + 20.0
        assert car[L.CAR_UP][2] <= -0.5 + 1e-4
        assert away @ car[L.CAR_UP] > 0.9 * np.linalg.norm(away), "wheels face the ball"
        closing = (ball[L.BALL_VEL] - car[L.CAR_VEL]) @ (away / np.linalg.norm(away))
        assert 300.0 * 0.99 <= closing <= 900.0 + 1e-2
        assert 700.0 <= ball[L.BALL_POS][2] <= 1800.0 and np.linalg.norm(ball[L.BALL_VEL]) > 0.0
        sim_car = arenas.cars[0][main]
        state = sim_car.get_state()
        assert state.has_jumped and state.has_double_jumped, "jump and flip already used"
        for _ in range(120):
            arenas.arenas[0].step(2)
            state = sim_car.get_state()
            if state.is_on_ground and state.pos.z > 250.0:
                met += 1
                assert not state.has_jumped, "the touch gives the jump back"
                break
    assert met >= 0.8 * resets, f"wheels met the ball in {met} of {resets} setups"


def test_jump_challenge_ball_hangs_above_the_car(arenas: Arenas) -> None:
    """The main car stands on the floor; the ball is 0..200 uu off the vertical above it, 300..1500 uu
    high and rising; idle for 0.25 s, the car does not reach it."""
    rng = np.random.default_rng(5)
    for _ in range(20):
        st = _reset(arenas, STATE_SETTERS["jump_challenge"], rng)
        ball = st.ball[0, 0]
        cars = st.cars[0, :, 0]
        horizontal = np.linalg.norm(cars[:, L.CAR_POS][:, :2] - ball[L.BALL_POS][:2], axis=1)
        main = _main_car(cars, horizontal <= 200.0 + 1e-2)
        car = cars[main]
        assert car[L.CAR_ON_GROUND] == 1.0 and car[L.CAR_POS][2] == pytest.approx(L.CAR_REST_Z)
        assert np.linalg.norm(car[L.CAR_VEL]) <= 300.0 + 1e-2
        assert 300.0 - 1e-3 <= ball[L.BALL_POS][2] <= 1500.0 + 1e-3
        assert 1.0 - 1e-3 <= ball[L.BALL_VEL][2] <= 300.0 + 1e-3
        assert not _idle(arenas, 30).cars[0, :, 0, L.CAR_HIT_LAST_STEP].any()


def test_random_ground_puts_every_car_on_the_floor(arenas: Arenas) -> None:
    rng = np.random.default_rng(6)
    for _ in range(20):
        cars = _reset(arenas, STATE_SETTERS["random_ground"], rng).cars[0, :, 0]
        np.testing.assert_allclose(cars[:, L.CAR_POS][:, 2], L.CAR_REST_Z, atol=1e-3)
        assert np.all(cars[:, L.CAR_ON_GROUND] == 1.0)
        np.testing.assert_allclose(cars[:, L.CAR_UP], np.tile([0.0, 0.0, 1.0], (2, 1)), atol=1e-5)
