"""State setters: kickoff spots with the ball at rest in the centre; random states inside the field; the
defensive start (``defense``), its mirror (``attack``) and the finish from the end line (``end_line``)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import partial

import numpy as np
import pytest
import RocketSim as rsim

from speedflip.env import layout as L
from speedflip.env.arenas import Arenas, GameArrays
from speedflip.env.states import STATE_SETTERS, StateSetter, attack, defense, end_line, kickoff, random_state
from speedflip.env.vec_env import RocketLeagueVecEnv

# Rocket League's soccar kickoff spots for blue (orange: the same rotated 180 degrees about z)
BLUE_KICKOFF_SPOTS = {(-2048, -2560), (2048, -2560), (-256, -3840), (256, -3840), (0, -4608)}
# the field's corners are cut by 45-degree walls on the planes |x| + |y| = 8064
CORNER_PLANE = 8064.0


def _spots(xy: np.ndarray) -> set[tuple[int, int]]:
    return {(round(float(x)), round(float(y))) for x, y in xy}


def test_kickoff_setter() -> None:
    """Cars on distinct kickoff spots, orange mirrored, 33 boost, facing the ball; ball still at centre."""
    arenas = Arenas(num_arenas=1, blue_size=3, orange_size=3)
    rng = np.random.default_rng(0)
    seen: set[tuple[int, int]] = set()
    for _ in range(20):
        arenas.step_physics_only(30)  # move things around between resets
        kickoff(arenas.arenas[0], arenas.cars[0], rng)
        st = arenas.read_all()
        ball = st.ball[0, 0]
        np.testing.assert_allclose(ball[L.BALL_POS], [0.0, 0.0, L.BALL_REST_Z], atol=1e-3)
        np.testing.assert_array_equal(ball[L.BALL_VEL], 0.0)
        np.testing.assert_array_equal(ball[L.BALL_ANG_VEL], 0.0)
        cars = st.cars[0, :, 0]
        blue, orange = _spots(cars[:3, 11:13]), _spots(-cars[3:, 11:13])
        assert len(blue) == 3 and blue <= BLUE_KICKOFF_SPOTS
        assert orange == blue, "orange takes the mirrored spots"
        seen |= blue
        np.testing.assert_allclose(cars[:, L.CAR_POS][:, 2], L.CAR_REST_Z, atol=0.5)
        np.testing.assert_array_equal(cars[:, L.CAR_VEL], 0.0)
        np.testing.assert_allclose(cars[:, L.CAR_BOOST], 100.0 / 3.0, atol=1e-3)
        assert np.all(cars[:, L.CAR_ON_GROUND] == 1.0)
        to_ball = -cars[:, L.CAR_POS]
        to_ball[:, 2] = 0.0
        to_ball /= np.linalg.norm(to_ball, axis=1, keepdims=True)
        cos = np.sum(to_ball * cars[:, L.CAR_FORWARD], axis=1)
        assert np.all(cos > 0.99), "every car faces the ball"
    assert seen == BLUE_KICKOFF_SPOTS, "all five spots come up over 20 kickoffs"


def _random_states(n_resets: int, air_fraction: float = 0.2, seed: int = 0) -> list[GameArrays]:
    arenas = Arenas(num_arenas=1, blue_size=3, orange_size=3)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_resets):
        random_state(arenas.arenas[0], arenas.cars[0], rng, air_fraction=air_fraction)
        out.append(arenas.read_all().copy())
    return out


@pytest.fixture(scope="module")
def random_states() -> list[GameArrays]:
    return _random_states(400)  # 400 balls, 2400 cars


def test_random_state_ball_inside_field_and_bounded(random_states: list[GameArrays]) -> None:
    ball = np.stack([s.ball[0, 0] for s in random_states])
    pos, vel = ball[:, L.BALL_POS], ball[:, L.BALL_VEL]
    assert np.all(np.abs(pos[:, 0]) < L.SIDE_WALL_X - L.BALL_RADIUS)
    assert np.all(np.abs(pos[:, 1]) < L.BACK_WALL_Y - L.BALL_RADIUS)
    assert np.all(np.abs(pos[:, 0]) + np.abs(pos[:, 1]) < CORNER_PLANE - L.BALL_RADIUS * np.sqrt(2))
    assert np.all(pos[:, 2] >= L.BALL_RADIUS - 1e-3)
    assert np.all(pos[:, 2] < L.CEILING_Z - L.BALL_RADIUS)
    speed = np.linalg.norm(vel, axis=1)
    assert np.all(speed <= 2000.0 + 1e-2)
    assert speed.std() > 100.0, "speeds vary"
    assert 0.3 < np.mean(pos[:, 2] > L.BALL_REST_Z + 1.0) < 0.7, "about half the balls start in the air"


def test_random_state_cars_bounded(random_states: list[GameArrays]) -> None:
    """Cars inside the side and back walls, below the ceiling, speed <= 1500, boost 0..100, mixed teams."""
    cars = np.concatenate([s.cars[0, :, 0] for s in random_states])
    pos = cars[:, L.CAR_POS]
    assert np.all(np.abs(pos[:, 0]) < L.SIDE_WALL_X)
    assert np.all(np.abs(pos[:, 1]) < L.BACK_WALL_Y)
    assert np.all((pos[:, 2] >= L.CAR_REST_Z - 1e-3) & (pos[:, 2] < L.CEILING_Z))
    assert np.all(np.linalg.norm(cars[:, L.CAR_VEL], axis=1) <= 1500.0 + 1e-2)
    assert np.all((cars[:, L.CAR_BOOST] >= 0.0) & (cars[:, L.CAR_BOOST] <= 100.0))
    assert not np.any(cars[:, L.CAR_IS_DEMOED])


def test_random_state_cars_not_behind_corner_walls(random_states: list[GameArrays]) -> None:
    """No car starts behind the 45-degree corner walls (|x| + |y| > 8064), i.e. outside the field."""
    cars = np.concatenate([s.cars[0, :, 0] for s in random_states])
    pos = cars[:, L.CAR_POS]
    assert np.all(np.abs(pos[:, 0]) + np.abs(pos[:, 1]) < CORNER_PLANE)


def test_random_state_air_fraction(random_states: list[GameArrays]) -> None:
    """About 20% of cars start in the air (300..1400 uu, not on the ground), the rest on the floor."""
    cars = np.concatenate([s.cars[0, :, 0] for s in random_states])
    z, on_ground = cars[:, L.CAR_POS][:, 2], cars[:, L.CAR_ON_GROUND] == 1.0
    in_air = z > 300.0 - 1e-3
    assert 0.15 < in_air.mean() < 0.25  # 2400 samples: std of the mean is 0.008
    assert np.all(z[in_air] <= 1400.0)
    np.testing.assert_allclose(z[~in_air], L.CAR_REST_Z, atol=1e-3)
    np.testing.assert_array_equal(on_ground, ~in_air)
    # grounded cars sit flat and move horizontally along their heading
    flat = cars[~in_air]
    np.testing.assert_allclose(flat[:, L.CAR_UP], np.tile([0.0, 0.0, 1.0], (len(flat), 1)), atol=1e-5)
    np.testing.assert_allclose(flat[:, L.CAR_VEL][:, 2], 0.0, atol=1e-3)
    speed = np.linalg.norm(flat[:, L.CAR_VEL], axis=1)
    moving = speed > 1.0
    along = np.sum(flat[moving][:, L.CAR_VEL] * flat[moving][:, L.CAR_FORWARD], axis=1)
    np.testing.assert_allclose(along, speed[moving], rtol=1e-4)


@pytest.mark.parametrize(("fraction", "expected"), [(0.0, 0.0), (1.0, 1.0)])
def test_random_state_air_fraction_extremes(fraction: float, expected: float) -> None:
    cars = np.concatenate([s.cars[0, :, 0] for s in _random_states(20, air_fraction=fraction)])
    assert np.mean(cars[:, L.CAR_ON_GROUND] == 0.0) == expected


def test_random_state_is_seeded() -> None:
    a, b = _random_states(3, seed=5), _random_states(3, seed=5)
    c = _random_states(3, seed=6)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.cars, y.cars)
        np.testing.assert_array_equal(x.ball, y.ball)
    assert not np.array_equal(a[0].ball, c[0].ball)


def test_env_uses_setter_weights(make_env: Callable[..., RocketLeagueVecEnv]) -> None:
    """state_setters={'random': 1} never produces a kickoff; {'kickoff': 1} always does."""
    assert {"kickoff", "random"} <= set(STATE_SETTERS)
    env = make_env(num_arenas=8, blue_size=1, orange_size=1, state_setters={"random": 1.0})
    env.reset()
    ball = env.state.ball[:, 0, L.BALL_POS]
    assert not np.any(np.all(np.isclose(ball, [0.0, 0.0, L.BALL_REST_Z]), axis=1))
    env = make_env(num_arenas=8, blue_size=1, orange_size=1, state_setters={"kickoff": 1.0, "random": 0.0})
    env.reset()
    np.testing.assert_allclose(env.state.ball[:, 0, L.BALL_POS], [[0.0, 0.0, L.BALL_REST_Z]] * 8, atol=1e-3)


def test_defense_puts_the_ball_near_the_main_cars_own_goal_with_the_car_upfield() -> None:
    """1v1, 100 resets. The main car (the setter's first draw from ``rng``) has the ball between itself
    and its own goal: ball on the floor in the car's own half 2400-4400 uu from midfield, |x| <= 3000,
    rolling at <= 800 uu/s; car on the floor 600-2000 uu from the ball within 60 degrees of straight
    upfield of it, facing it within 45 degrees, driving forwards at <= 1400 uu/s. The other car stands
    still 1200+ uu from both. Both teams get to defend."""
    arenas = Arenas(num_arenas=1, blue_size=1, orange_size=1)
    rng = np.random.default_rng(5)
    defended = set()
    try:
        for _ in range(100):
            main = int(copy.deepcopy(rng).integers(2))
            defense(arenas.arenas[0], arenas.cars[0], rng)
            st = arenas.read_all()
            ball, cars = st.ball[0, 0], st.cars[0, :, 0]
            car, other = cars[main], cars[1 - main]
            own = -1.0 if car[L.CAR_TEAM] == L.BLUE else 1.0  # the sign of y at the car's own goal
            defended.add(own)
            _assert_ball_in_third_car_facing_it(ball, car, end=own)
            np.testing.assert_array_equal(other[L.CAR_VEL], 0.0)
            for point in (car[L.CAR_POS][:2], ball[L.BALL_POS][:2]):
                assert np.linalg.norm(other[L.CAR_POS][:2] - point) >= 1200.0 - 1e-2
    finally:
        arenas.close()
    assert defended == {-1.0, 1.0}


def test_defense_driving_straight_at_the_ball_sends_it_towards_the_own_goal() -> None:
    """What the setup is for: from ``defense`` with the ball at rest (``ball_max_speed=0``), a car that
    just steers at the ball at full throttle hits it within 3 s and sends it towards its own goal - the
    play that concedes own goals. 20 resets; checked per reset."""
    directions = _first_touch_directions(partial(defense, ball_max_speed=0.0), seed=8)
    assert all(d > 0.0 for d in directions), directions


def test_attack_puts_the_ball_near_the_opponent_goal_with_the_car_behind_it() -> None:
    """1v1, 100 resets: ``defense`` turned round. The main car (the setter's first draw from ``rng``)
    has the ball between itself and the opponent goal: ball on the floor in the opponent half 2400-4400
    uu from midfield, |x| <= 3000, rolling at <= 800 uu/s; car on the floor 600-2000 uu from the ball
    within 60 degrees of straight back towards midfield, facing it within 45 degrees, driving forwards
    at <= 1400 uu/s. The other car either stands still on its goal line (|x| <= 700, |y| = 4900)
    facing midfield - in about half the resets (``defender_in_goal_fraction=0.5``) - or stands still
    1200+ uu from car and ball. Both teams get to attack."""
    arenas = Arenas(num_arenas=1, blue_size=1, orange_size=1)
    rng = np.random.default_rng(6)
    attacked, in_goal = set(), 0
    try:
        for _ in range(100):
            main = int(copy.deepcopy(rng).integers(2))
            attack(arenas.arenas[0], arenas.cars[0], rng)
            st = arenas.read_all()
            ball, cars = st.ball[0, 0], st.cars[0, :, 0]
            car, other = cars[main], cars[1 - main]
            own = -1.0 if car[L.CAR_TEAM] == L.BLUE else 1.0  # the sign of y at the car's own goal
            attacked.add(own)
            _assert_ball_in_third_car_facing_it(ball, car, end=-own)
            np.testing.assert_array_equal(other[L.CAR_VEL], 0.0)
            ox, oy = other[L.CAR_POS][:2]
            if abs(oy) == pytest.approx(4900.0, abs=1e-2):
                in_goal += 1
                assert oy == pytest.approx(-own * 4900.0, abs=1e-2) and abs(ox) <= 700.0 + 1e-3, "its own goal"
                assert other[L.CAR_FORWARD][:2] @ np.array([0.0, own]) == pytest.approx(1.0, abs=1e-4)
            else:
                for point in (car[L.CAR_POS][:2], ball[L.BALL_POS][:2]):
                    assert np.linalg.norm(other[L.CAR_POS][:2] - point) >= 1200.0 - 1e-2
    finally:
        arenas.close()
    assert attacked == {-1.0, 1.0}
    assert 35 <= in_goal <= 65  # binomial(100, 0.5): outside this range about 1 time in 400


def test_attack_defender_in_goal_fraction_bounds() -> None:
    """``defender_in_goal_fraction`` 1 puts the defender on its goal line every time, 0 never."""
    arenas = Arenas(num_arenas=1, blue_size=1, orange_size=1)
    rng = np.random.default_rng(7)
    try:
        for fraction, expected in ((1.0, True), (0.0, False)):
            for _ in range(20):
                main = int(copy.deepcopy(rng).integers(2))
                attack(arenas.arenas[0], arenas.cars[0], rng, defender_in_goal_fraction=fraction)
                other_y = arenas.read_all().cars[0, 1 - main, 0, L.CAR_POS][1]
                assert bool(abs(other_y) == pytest.approx(4900.0, abs=1e-2)) is expected
    finally:
        arenas.close()


def test_attack_driving_straight_at_the_ball_sends_it_towards_the_opponent_goal() -> None:
    """What the setup is for: from ``attack`` with the ball at rest and no defender, a car that just
    steers at the ball at full throttle hits it within 3 s and sends it towards the opponent goal - the
    chance the drill gives. 20 resets; checked per reset."""
    setter = partial(attack, ball_max_speed=0.0, defender_in_goal_fraction=0.0)
    directions = _first_touch_directions(setter, seed=9)
    assert all(d < 0.0 for d in directions), directions


def test_end_line_puts_the_ball_beside_the_opponent_goal_with_the_car_behind_it() -> None:
    """1v1, 100 resets. The main car (the setter's first draw from ``rng``) attacks a ball that lies beside
    the opponent goal near its back wall: on the floor, outside the posts (|x| >= 892.755 + 150), |x| <=
    3000, 250-1000 uu from the back wall (|y| 4120-4870), inside the corner walls, rolling at <= 400 uu/s;
    the car on the floor 600-1500 uu from it within 60 degrees of straight towards midfield, facing it
    within 45 degrees, driving forwards at <= 1400 uu/s. The other car is on its goal line in about half
    the resets, else 1200+ uu from car and ball. Both teams get to attack, on both sides of the goal."""
    arenas = Arenas(num_arenas=1, blue_size=1, orange_size=1)
    rng = np.random.default_rng(10)
    attacked, sides, in_goal = set(), set(), 0
    try:
        for _ in range(100):
            main = int(copy.deepcopy(rng).integers(2))
            end_line(arenas.arenas[0], arenas.cars[0], rng)
            st = arenas.read_all()
            ball, cars = st.ball[0, 0], st.cars[0, :, 0]
            car, other = cars[main], cars[1 - main]
            end = 1.0 if car[L.CAR_TEAM] == L.BLUE else -1.0  # the sign of y at the goal it attacks
            attacked.add(end)
            bx, by, bz = ball[L.BALL_POS]
            sides.add(float(np.sign(bx)))
            assert bz == pytest.approx(L.BALL_REST_Z, abs=1e-3)
            assert 892.755 + 150.0 - 1e-3 <= abs(bx) <= 3000.0 + 1e-3, "outside the posts"
            assert 4120.0 - 1e-3 <= end * by <= 4870.0 + 1e-3, "near the attacked back wall"
            assert abs(bx) + abs(by) <= CORNER_PLANE - 300.0 + 1e-3, "inside the corner walls"
            assert ball[L.BALL_VEL][2] == 0.0 and np.linalg.norm(ball[L.BALL_VEL]) <= 400.0 + 1e-2
            offset = car[L.CAR_POS][:2] - ball[L.BALL_POS][:2]
            distance = float(np.linalg.norm(offset))
            assert 600.0 - 1e-2 <= distance <= 1500.0 + 1e-2
            assert offset @ np.array([0.0, -end]) / distance >= np.cos(np.radians(60.0)) - 1e-4, "midfield side"
            assert car[L.CAR_FORWARD][:2] @ (-offset) / distance >= np.cos(np.radians(45.0)) - 1e-4, "facing it"
            speed = float(np.linalg.norm(car[L.CAR_VEL]))
            assert speed <= 1400.0 + 1e-2 and car[L.CAR_VEL] @ car[L.CAR_FORWARD] >= speed - 1e-2
            if abs(other[L.CAR_POS][1]) == pytest.approx(4900.0, abs=1e-2):
                in_goal += 1
                assert other[L.CAR_POS][1] == pytest.approx(end * 4900.0, abs=1e-2), "the goal it defends"
            else:
                for point in (car[L.CAR_POS][:2], ball[L.BALL_POS][:2]):
                    assert np.linalg.norm(other[L.CAR_POS][:2] - point) >= 1200.0 - 1e-2
    finally:
        arenas.close()
    assert attacked == {-1.0, 1.0} and sides == {-1.0, 1.0}
    assert 35 <= in_goal <= 65  # binomial(100, 0.5): outside this range about 1 time in 400


def test_end_line_is_in_the_env_and_replays_from_a_seed() -> None:
    """``env.state_setters={end_line: 1}`` starts every episode there (the ball 250-1000 uu from a back
    wall, outside the posts), and two envs with one seed start the same."""
    from speedflip.config import EnvConfig

    cfg = EnvConfig(num_arenas=4, blue_size=1, orange_size=1, state_setters={"end_line": 1.0})
    first, second = RocketLeagueVecEnv(cfg, seed=3), RocketLeagueVecEnv(cfg, seed=3)
    try:
        first.reset()
        second.reset()
        ball = first.state.ball[:, 0, L.BALL_POS]
        assert np.all(np.abs(ball[:, 1]) >= 4120.0 - 1e-3) and np.all(np.abs(ball[:, 0]) >= 892.755 + 150.0 - 1e-3)
        np.testing.assert_array_equal(ball, second.state.ball[:, 0, L.BALL_POS])
    finally:
        first.close()
        second.close()


def _first_touch_directions(setter: StateSetter, seed: int, resets: int = 20) -> list[float]:
    """From ``resets`` resets of ``setter`` (1v1), a car that just steers at the ball at full throttle
    (the setter's main car, its first draw from the rng): per reset, ``own * ball vy`` right after its
    first touch within 3 s (> 0: towards its own goal, < 0: towards the opponent goal; 0: no touch)."""
    arenas = Arenas(num_arenas=1, blue_size=1, orange_size=1)
    rng = np.random.default_rng(seed)
    directions = []
    try:
        for _ in range(resets):
            main = int(copy.deepcopy(rng).integers(2))
            setter(arenas.arenas[0], arenas.cars[0], rng)
            arenas.release_controls(0)
            car = arenas.cars[0][main]
            own = -1.0 if car.team == rsim.Team.BLUE else 1.0
            direction = 0.0
            for _tick in range(0, 360, 4):
                st = arenas.read_all()
                ball_vel = st.ball[0, 0, L.BALL_VEL]
                if np.linalg.norm(ball_vel) > 50.0:  # touched
                    direction = float(own * ball_vel[1])
                    break
                me = st.cars[0, main, 0]
                to_ball = st.ball[0, 0, L.BALL_POS][:2] - me[L.CAR_POS][:2]
                forward, right = me[L.CAR_FORWARD][:2], me[L.CAR_RIGHT][:2]
                controls = rsim.CarControls()
                controls.throttle = 1.0
                controls.steer = float(np.clip(3.0 * np.arctan2(to_ball @ right, to_ball @ forward), -1.0, 1.0))
                car.set_controls(controls)
                arenas.arenas[0].step(4)
            directions.append(direction)
    finally:
        arenas.close()
    return directions


def _assert_ball_in_third_car_facing_it(ball: np.ndarray, car: np.ndarray, end: float) -> None:
    """What ``defense`` (``end`` = the car's own goal's y sign) and ``attack`` (``end`` = the opponent
    goal's) share: the ball on the floor in the ``end`` half 2400-4400 uu from midfield, |x| <= 3000,
    rolling horizontally at <= 800 uu/s; the car on the floor 600-2000 uu from it within 60 degrees of
    straight towards midfield (away from ``end``), facing it within 45 degrees, driving forwards at
    <= 1400 uu/s."""
    bx, by, bz = ball[L.BALL_POS]
    assert bz == pytest.approx(L.BALL_REST_Z, abs=1e-3) and abs(bx) <= 3000.0 + 1e-3
    assert 2400.0 - 1e-3 <= end * by <= 4400.0 + 1e-3, "in the drill's third"
    assert ball[L.BALL_VEL][2] == 0.0 and np.linalg.norm(ball[L.BALL_VEL]) <= 800.0 + 1e-2
    offset = car[L.CAR_POS][:2] - ball[L.BALL_POS][:2]
    distance = float(np.linalg.norm(offset))
    assert 600.0 - 1e-2 <= distance <= 2000.0 + 1e-2
    to_midfield = np.array([0.0, -end])
    assert offset @ to_midfield / distance >= np.cos(np.radians(60.0)) - 1e-4, "on the midfield side of the ball"
    forward = car[L.CAR_FORWARD][:2]
    assert forward @ (-offset) / distance >= np.cos(np.radians(45.0)) - 1e-4, "facing the ball"
    assert car[L.CAR_POS][2] == pytest.approx(L.CAR_REST_Z, abs=1e-3)
    speed = float(np.linalg.norm(car[L.CAR_VEL]))
    assert speed <= 1400.0 + 1e-2 and car[L.CAR_VEL] @ car[L.CAR_FORWARD] >= speed - 1e-2
