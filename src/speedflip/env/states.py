"""State setters: how an episode starts. Each one sets one arena; the env picks one per reset.

A setter is ``fn(arena, cars, rng, **options)``: it places the ball and every car of ``arena`` using
only ``rng`` for randomness (so resets replay exactly from a seed), and its keyword-only parameters
are the options a config may set (``env.state_setter_options``, see :func:`check_setter_options`).

Units: positions in uu (unreal units), speeds in uu/s, angles in radians, boost 0..100. World frame:
blue defends -y and attacks +y, orange the reverse; z is up. Every position stays inside the field:
within the side walls (|x| < 4096), the back walls (|y| < 5120), the ceiling (z < 2044) and the 45-degree
corner walls (|x| + |y| < 8064).

Besides the kickoff and random setters there is a turtled start (every car on its roof, to learn
recovery), a defensive start (``defense``: the ball near one car's own goal with the car upfield of
it, the position own goals come from), its mirror (``attack``: the ball near the opponent goal with
the car behind it, a chance to finish, a defender on its goal line half the time), ``end_line`` (the ball
beside the opponent goal near its back wall, the car behind it: a finish from the end line) and four
*mechanics* setups, each built around one randomly chosen "main" car while the other cars wait on
the ground away from the action:

- ``wall``: the main car on a side wall (wheels on the wall), the ball nearby.
- ``air_dribble``: the main car in the air, nose up, moving towards the opponent goal, the ball on its roof.
- ``flip_reset``: the ball in the air, the main car below it, upside down and flying at it wheels first.
- ``jump_challenge``: the ball high above the main car, which stands on the ground underneath.

RocketSim keeps a ball whose velocity is exactly zero frozen in place until something touches it (as
at a kickoff), so every setter that puts the ball in the air gives it a non-zero velocity.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from functools import partial

import numpy as np
import RocketSim as rsim

from speedflip._types import Array
from speedflip.env import layout as L
from speedflip.registry import MECHANICS_SETTERS as MECHANICS_SETTERS
from speedflip.registry import SETTER_OPTIONS, STATE_SETTER_NAMES
from speedflip.registry import OptionValue as OptionValue
from speedflip.registry import check_setter_options as check_setter_options
from speedflip.registry import setter_options as setter_options

StateSetter = Callable[[rsim.Arena, list[rsim.Car], np.random.Generator], None]


KICKOFF_SPOTS = np.array(rsim.RLConst.CAR_SPAWN_LOCATIONS_SOCCAR, np.float64)  # blue side: (x, y, yaw)

WALL_CAR_Z = (500.0, 1500.0)  # the flat part of the side walls, above the ramp and below the ceiling curve
WALL_MAX_ABS_Y = 2800.0  # ... and away from the corner walls
OTHER_CARS_MIN_DISTANCE = 1200.0  # uu (horizontal) between a setup's main car/ball and the waiting cars
GOAL_POST_X = L.GOAL_POST_X
GOAL_LINE_KEEPER_Y = 4900.0  # uu from midfield: a car standing in front of its goal line (|y| 5120), in the mouth


def kickoff(arena: rsim.Arena, cars: list[rsim.Car], rng: np.random.Generator) -> None:
    """A standard kickoff: each team on distinct spawn spots of the 5 standard ones, mirrored.

    ``reset_kickoff`` resets the ball, pads and cars; the seats are then assigned here from ``rng``
    (RocketSim pairs cars to spots in the order of its internal car set, which is not reproducible
    across processes), so that orange car ``i`` always mirrors blue car ``i``.
    """
    arena.reset_kickoff(seed=int(rng.integers(0, 2**31 - 1)))
    blue = [c for c in cars if c.team == rsim.Team.BLUE]
    orange = [c for c in cars if c.team == rsim.Team.ORANGE]
    spots = rng.permutation(len(KICKOFF_SPOTS))
    for side, team_cars in ((1.0, blue), (-1.0, orange)):
        for seat, car in enumerate(team_cars):
            x, y, yaw = KICKOFF_SPOTS[spots[seat % len(spots)]]
            state = car.get_state()
            state.pos = rsim.Vec(float(side * x), float(side * y), L.CAR_REST_Z)
            state.rot_mat = rsim.Angle(float(yaw if side > 0 else yaw + np.pi), 0.0, 0.0).as_rot_mat()
            state.vel = rsim.Vec(0.0, 0.0, 0.0)
            state.ang_vel = rsim.Vec(0.0, 0.0, 0.0)
            car.set_state(state)


def random_state(
    arena: rsim.Arena,
    cars: list[rsim.Car],
    rng: np.random.Generator,
    *,
    ball_max_speed: float = 2000.0,
    car_max_speed: float = 1500.0,
    air_fraction: float = 0.2,
    cars_on_ground: bool = False,
) -> None:
    """Random ball and car positions and velocities.

    The ball starts in the air (z uniform in [91.25, 1200] uu) half of the time, at rest height
    otherwise, with a velocity of uniform direction and a speed uniform in [0, ``ball_max_speed``] uu/s.
    About ``air_fraction`` of the cars start in the air (z uniform in [300, 1400], random orientation
    and velocity up to ``car_max_speed``); the others stand on the floor, driving along their heading at
    a speed uniform in [0, ``car_max_speed``]. ``cars_on_ground=True`` puts every car on the floor.
    """
    margin = 300.0
    ball = rsim.BallState()
    ball_x, ball_y = _inside_field(rng, margin, L.BACK_WALL_Y - 1000)
    ball.pos = rsim.Vec(
        ball_x, ball_y, float(rng.uniform(L.BALL_RADIUS, 1200.0)) if rng.random() < 0.5 else L.BALL_REST_Z
    )
    ball.vel = rsim.Vec(*(float(v) for v in _random_vector(rng, ball_max_speed)))
    ball.ang_vel = rsim.Vec(0.0, 0.0, 0.0)
    arena.ball.set_state(ball)
    for car in cars:
        state = rsim.CarState()
        in_air = not cars_on_ground and rng.random() < air_fraction
        z = float(rng.uniform(300.0, 1400.0)) if in_air else L.CAR_REST_Z
        state.pos = rsim.Vec(*_inside_field(rng, margin, L.BACK_WALL_Y - margin), z)
        yaw = float(rng.uniform(-np.pi, np.pi))
        if in_air:
            pitch, roll = (float(x) for x in rng.uniform(-np.pi / 2, np.pi / 2, size=2))
            vel = _random_vector(rng, car_max_speed)
        else:
            pitch = roll = 0.0
            speed = float(rng.uniform(0.0, car_max_speed))
            vel = np.array([np.cos(yaw) * speed, np.sin(yaw) * speed, 0.0])
        state.rot_mat = rsim.Angle(yaw, pitch, roll).as_rot_mat()
        state.vel = rsim.Vec(*(float(v) for v in vel))
        state.ang_vel = rsim.Vec(0.0, 0.0, 0.0)
        state.boost = float(rng.uniform(0.0, 100.0))
        state.is_on_ground = not in_air
        state.has_jumped = in_air
        car.set_state(state)


def random_ground(
    arena: rsim.Arena,
    cars: list[rsim.Car],
    rng: np.random.Generator,
    *,
    ball_max_speed: float = 2000.0,
    car_max_speed: float = 1500.0,
) -> None:
    """:func:`random_state` with every car on the floor (``cars_on_ground=True``), as its own name so
    a weighted mix can hold both variants."""
    random_state(arena, cars, rng, ball_max_speed=ball_max_speed, car_max_speed=car_max_speed, cars_on_ground=True)


def turtled(
    arena: rsim.Arena, cars: list[rsim.Car], rng: np.random.Generator, *, ball_max_speed: float = 500.0
) -> None:
    """Every car upside down on the floor (roll = pi, up = (0, 0, -1)), at rest, at a random spot and
    heading at least 400 uu from the other cars; the ball rolls on the floor at a speed uniform in
    [0, ``ball_max_speed``] uu/s. The cars must recover (jump to flip over) before they can play."""
    taken: list[Array] = []
    for car in cars:
        xy = _spread_xy(rng, 400.0, L.BACK_WALL_Y - 400.0, taken, 400.0)
        taken.append(xy)
        yaw = float(rng.uniform(-np.pi, np.pi))
        rot = rsim.Angle(yaw, 0.0, np.pi).as_rot_mat()
        z = _roof_height(car) + 1.0  # the roof just above the floor
        _set_car(car, np.array([xy[0], xy[1], z]), rot, np.zeros(3), float(rng.uniform(0.0, 100.0)), on_ground=False)
    ball_xy = _spread_xy(rng, 400.0, L.BACK_WALL_Y - 1000.0, taken, 300.0)
    heading = float(rng.uniform(-np.pi, np.pi))
    speed = float(rng.uniform(0.0, ball_max_speed))
    _set_ball(arena, np.array([*ball_xy, L.BALL_REST_Z]), speed * np.array([np.cos(heading), np.sin(heading), 0.0]))


def wall(
    arena: rsim.Arena,
    cars: list[rsim.Car],
    rng: np.random.Generator,
    *,
    max_speed: float = 1200.0,
    ball_max_distance: float = 1000.0,
) -> None:
    """The main car on a side wall, wheels on it, the ball nearby; the other cars on the floor.

    Car: on the wall ``x = ±(4096 - 17)`` (up vector pointing into the field, horizontal), height
    uniform in [500, 1500], |y| <= 2800, heading uniform within the wall plane, driving along it at a
    speed uniform in [0, ``max_speed``] uu/s. Ball: 300..``ball_max_distance`` uu ahead of the car
    along its heading, 150..600 uu off the wall, z clamped to [93.15, 1800], drifting at 50..500 uu/s.
    """
    main = int(rng.integers(len(cars)))
    side = 1.0 if rng.random() < 0.5 else -1.0
    y = float(rng.uniform(-WALL_MAX_ABS_Y, WALL_MAX_ABS_Y))
    z = float(rng.uniform(*WALL_CAR_Z))
    heading = float(rng.uniform(-np.pi, np.pi))
    forward = np.array([0.0, np.cos(heading), np.sin(heading)])
    up = np.array([-side, 0.0, 0.0])
    pos = np.array([side * (L.SIDE_WALL_X - L.CAR_REST_Z), y, z])
    speed = float(rng.uniform(0.0, max_speed))
    _set_car(cars[main], pos, _rot(forward, up), forward * speed, float(rng.uniform(0.0, 100.0)), on_ground=True)
    ahead = float(rng.uniform(300.0, max(ball_max_distance, 300.0)))
    off_wall = float(rng.uniform(150.0, 600.0))
    ball_pos = np.array(
        [
            side * (L.SIDE_WALL_X - off_wall),
            float(np.clip(y + forward[1] * ahead, -3600.0, 3600.0)),
            float(np.clip(z + forward[2] * ahead, L.BALL_REST_Z, 1800.0)),
        ]
    )
    _set_ball(arena, ball_pos, _random_vector(rng, 500.0, min_norm=50.0))
    _wait_on_ground(cars, [main], rng, [pos[:2], ball_pos[:2]])


def air_dribble(
    arena: rsim.Arena,
    cars: list[rsim.Car],
    rng: np.random.Generator,
    *,
    min_height: float = 300.0,
    max_height: float = 1000.0,
    max_speed: float = 1300.0,
) -> None:
    """The main car in the air carrying the ball on its roof; the other cars on the floor.

    Car: height uniform in [``min_height``, ``max_height``] (capped at 1500 so the ball stays below the
    ceiling), heading towards the opponent goal within ±45 degrees, nose up 10..40 degrees, moving at a
    horizontal speed uniform in [400, ``max_speed``] along its heading plus 100..400 uu/s upwards,
    boost 30..100. Ball: on the roof (its centre ``roof + 91.25 + 0..10`` uu along the car's up vector
    above the hitbox centre) with the car's velocity; the car rises 50 uu/s faster along its up
    vector, so it pushes the ball within a few ticks unless it steers away.
    """
    main = int(rng.integers(len(cars)))
    car = cars[main]
    attack = 1.0 if car.team == rsim.Team.BLUE else -1.0
    yaw = attack * np.pi / 2 + float(rng.uniform(-np.pi / 4, np.pi / 4))
    pitch = float(rng.uniform(np.radians(10.0), np.radians(40.0)))
    rot = rsim.Angle(yaw, pitch, 0.0).as_rot_mat()
    forward, up = rot.forward.as_numpy().astype(np.float64), rot.up.as_numpy().astype(np.float64)
    low, high = sorted((min(min_height, 1500.0), min(max_height, 1500.0)))
    xy = np.array(_inside_field(rng, 1500.0, L.BACK_WALL_Y - 1500.0))
    pos = np.array([xy[0], xy[1], float(rng.uniform(max(low, 150.0), max(high, 150.0)))])
    heading = np.array([np.cos(yaw), np.sin(yaw), 0.0])
    ball_vel = heading * float(rng.uniform(400.0, max(max_speed, 400.0))) + np.array([0.0, 0.0, rng.uniform(100, 400)])
    _set_car(car, pos, rot, ball_vel + up * 50.0, float(rng.uniform(30.0, 100.0)), on_ground=False)
    config = car.get_config()
    centre = pos + forward * float(config.hitbox_pos_offset.x)
    ball_pos = centre + up * (_roof_height(car) + L.BALL_RADIUS + float(rng.uniform(0.0, 10.0)))
    _set_ball(arena, ball_pos, ball_vel)
    _wait_on_ground(cars, [main], rng, [pos[:2], ball_pos[:2]])


def flip_reset(
    arena: rsim.Arena,
    cars: list[rsim.Car],
    rng: np.random.Generator,
    *,
    min_height: float = 800.0,
    max_height: float = 1600.0,
) -> None:
    """The ball in the air, the main car below it flying at it wheels first; the other cars on the floor.

    Ball: height uniform in [``min_height``, ``max_height``] (clamped to [700, 1800]), drifting at up to
    400 uu/s horizontally and -200..300 uu/s vertically. Car: 250..550 uu from the ball in a direction
    ``d`` pointing down (``d_z`` in [-1, -0.5]), its up vector along ``d`` so its wheels face the ball,
    and its velocity the ball's plus 300..900 uu/s towards the ball. Gravity pulls both alike, so
    without input the car's wheels meet the ball (a flip reset) within about 2 s. The car has used
    its jump and its second jump/flip.
    """
    main = int(rng.integers(len(cars)))
    car = cars[main]
    low, high = sorted((float(np.clip(min_height, 700.0, 1800.0)), float(np.clip(max_height, 700.0, 1800.0))))
    ball_pos = np.array([*_inside_field(rng, 1200.0, L.BACK_WALL_Y - 1200.0), float(rng.uniform(low, high))])
    drift = _random_vector(rng, 400.0)
    ball_vel = np.array([drift[0], drift[1], rng.uniform(-200.0, 300.0)])
    if not np.any(ball_vel):
        ball_vel[2] = 1.0  # never frozen
    azimuth = float(rng.uniform(-np.pi, np.pi))
    dz = -float(rng.uniform(0.5, 1.0))
    d = np.array([np.cos(azimuth) * np.sqrt(1.0 - dz * dz), np.sin(azimuth) * np.sqrt(1.0 - dz * dz), dz])
    rot = _rot(_perpendicular(rng, d), d)
    forward = rot.forward.as_numpy().astype(np.float64)
    centre = ball_pos + d * float(rng.uniform(250.0, 550.0))  # the hitbox centre on the line through the ball
    pos = centre - forward * float(car.get_config().hitbox_pos_offset.x)
    vel = ball_vel - d * float(rng.uniform(300.0, 900.0))
    _set_car(car, pos, rot, vel, float(rng.uniform(0.0, 100.0)), on_ground=False, flip_used=True)
    _set_ball(arena, ball_pos, ball_vel)
    _wait_on_ground(cars, [main], rng, [pos[:2], ball_pos[:2]])


def jump_challenge(
    arena: rsim.Arena,
    cars: list[rsim.Car],
    rng: np.random.Generator,
    *,
    min_height: float = 300.0,
    max_height: float = 1500.0,
) -> None:
    """The ball high above the main car, which stands on the floor underneath; the other cars on the floor.

    Car: on the floor, random heading, rolling at 0..300 uu/s, boost 20..100. Ball: 0..200 uu from
    the point above the car, its centre at a height uniform in [``min_height``, ``max_height``]
    (clamped to [250, 1900]), drifting at up to 150 uu/s horizontally and rising at 1..300 uu/s: the
    car must jump (or fly) to reach it before it falls.
    """
    main = int(rng.integers(len(cars)))
    car = cars[main]
    xy = np.array(_inside_field(rng, 800.0, L.BACK_WALL_Y - 800.0))
    yaw = float(rng.uniform(-np.pi, np.pi))
    heading = np.array([np.cos(yaw), np.sin(yaw), 0.0])
    pos = np.array([xy[0], xy[1], L.CAR_REST_Z])
    rot = rsim.Angle(yaw, 0.0, 0.0).as_rot_mat()
    _set_car(car, pos, rot, heading * float(rng.uniform(0.0, 300.0)), float(rng.uniform(20.0, 100.0)), on_ground=True)
    low, high = sorted((float(np.clip(min_height, 250.0, 1900.0)), float(np.clip(max_height, 250.0, 1900.0))))
    angle = float(rng.uniform(-np.pi, np.pi))
    offset = float(rng.uniform(0.0, 200.0)) * np.array([np.cos(angle), np.sin(angle)])
    ball_pos = np.array([xy[0] + offset[0], xy[1] + offset[1], float(rng.uniform(low, high))])
    drift = _random_vector(rng, 150.0)
    _set_ball(arena, ball_pos, np.array([drift[0], drift[1], rng.uniform(1.0, 300.0)]))
    _wait_on_ground(cars, [main], rng, [pos[:2], ball_pos[:2]])


def defense(
    arena: rsim.Arena,
    cars: list[rsim.Car],
    rng: np.random.Generator,
    *,
    ball_max_speed: float = 800.0,
    car_max_speed: float = 1400.0,
) -> None:
    """The ball in one car's defensive third with that car upfield of it; the other cars on the floor.

    The position where bots put the ball into their own net (docs/learning.md, seventeenth session):
    the car between the ball and midfield, facing the ball, so driving straight at it sends the ball
    towards its own goal. To play it the car must get goal-side first (around the ball) or clear it
    wide. Ball: on the floor, ``|x| <= 3000``, 2400..4400 uu from midfield on the main car's own half,
    rolling at 0..``ball_max_speed`` uu/s in a random horizontal direction. Main car: 600..2000 uu
    from the ball, in a direction within 60 degrees of straight upfield (towards the opponent goal),
    facing the ball within 45 degrees, driving along its heading at 0..``car_max_speed`` uu/s, boost
    0..100. Every other car stands still on the floor at least 1200 uu from both.
    """
    main, car_xy, ball_xy = _ball_in_third(arena, cars, rng, True, ball_max_speed, car_max_speed)
    _wait_on_ground(cars, [main], rng, [car_xy, ball_xy])


def attack(
    arena: rsim.Arena,
    cars: list[rsim.Car],
    rng: np.random.Generator,
    *,
    ball_max_speed: float = 800.0,
    car_max_speed: float = 1400.0,
    defender_in_goal_fraction: float = 0.5,
) -> None:
    """The ball in one car's attacking third with that car behind it: a chance to finish.

    ``defense`` turned round (docs/learning.md, nineteenth session: bots keep the ball in the attacking
    half for most of a 0-0 game without scoring, against idle and the goalie). Ball: on the floor,
    ``|x| <= 3000``, 2400..4400 uu from midfield on the opponent half, rolling at 0..``ball_max_speed``
    uu/s in a random horizontal direction. Main car: 600..2000 uu from the ball, in a direction within
    60 degrees of straight back towards midfield, facing the ball within 45 degrees, driving along its
    heading at 0..``car_max_speed`` uu/s, boost 0..100. In a ``defender_in_goal_fraction`` of the
    resets one car of the other team stands still on its goal line (``|x| <= 700``, 4900 uu from
    midfield) facing the field, so the drill is a save for it; every other car stands still on the
    floor at least 1200 uu from the ball and the cars already placed.
    """
    main, car_xy, ball_xy = _ball_in_third(arena, cars, rng, False, ball_max_speed, car_max_speed)
    placed, avoid = [main], [car_xy, ball_xy]
    _keeper_on_goal_line(cars, main, rng, defender_in_goal_fraction, placed, avoid)
    _wait_on_ground(cars, placed, rng, avoid)


def end_line(
    arena: rsim.Arena,
    cars: list[rsim.Car],
    rng: np.random.Generator,
    *,
    ball_max_speed: float = 400.0,
    car_max_speed: float = 1400.0,
    defender_in_goal_fraction: float = 0.5,
) -> None:
    """The ball beside the opponent goal near its back wall, one car behind it: a finish from the end line.

    Where bots that beat the rule bot stall against an empty net (docs/learning.md, thirty-third session:
    in the games the shipped bots did not win against idle the ball spent a quarter to a third of the time
    within 1000 uu of the attacked back wall outside the posts, touched a dozen times a game, no shot).
    Ball: on the floor, outside the posts (``GOAL_POST_X + 150 <= |x| <= 3000``), 250..1000 uu from the
    attacked back wall, inside the corner walls, rolling at 0..``ball_max_speed`` uu/s in a random
    horizontal direction. Main car: 600..1500 uu from the ball, within 60 degrees of straight back towards
    midfield, facing the ball within 45 degrees, driving along its heading at 0..``car_max_speed`` uu/s,
    boost 0..100. A defender stands on its goal line in a ``defender_in_goal_fraction`` of the resets, as
    in :func:`attack`; every other car stands still on the floor at least 1200 uu from the ball and the
    cars already placed.
    """
    main = int(rng.integers(len(cars)))
    end = 1.0 if cars[main].team == rsim.Team.BLUE else -1.0  # the sign of y at the goal the main car attacks
    for _ in range(100):
        x = float(rng.choice([-1.0, 1.0]) * rng.uniform(GOAL_POST_X + 150.0, 3000.0))
        y = end * float(rng.uniform(L.BACK_WALL_Y - 1000.0, L.BACK_WALL_Y - 250.0))
        if _within_field(x, y, 200.0, L.BACK_WALL_Y - 200.0):
            break
    else:  # never in practice: most of the band lies inside the corner walls
        x, y = 1500.0, end * (L.BACK_WALL_Y - 700.0)
    ball_xy = np.array([x, y])
    car_xy = _car_behind_ball(arena, cars[main], rng, end, ball_xy, ball_max_speed, car_max_speed, (600.0, 1500.0))
    placed, avoid = [main], [car_xy, ball_xy]
    _keeper_on_goal_line(cars, main, rng, defender_in_goal_fraction, placed, avoid)
    _wait_on_ground(cars, placed, rng, avoid)


def _keeper_on_goal_line(
    cars: list[rsim.Car], main: int, rng: np.random.Generator, fraction: float, placed: list[int], avoid: list[Array]
) -> None:
    """In a ``fraction`` of the calls one car of the main car's opponents stands still on its goal line
    (``|x| <= 700``, ``GOAL_LINE_KEEPER_Y`` from midfield) facing the field; it joins ``placed`` and ``avoid``."""
    defenders = [i for i, c in enumerate(cars) if c.team != cars[main].team]
    if defenders and rng.uniform() < fraction:
        keeper = defenders[int(rng.integers(len(defenders)))]
        goal = -1.0 if cars[keeper].team == rsim.Team.BLUE else 1.0  # the sign of y at its own goal
        xy = np.array([rng.uniform(-700.0, 700.0), goal * GOAL_LINE_KEEPER_Y])
        rot = rsim.Angle(-goal * np.pi / 2, 0.0, 0.0).as_rot_mat()  # facing midfield
        pos = np.array([xy[0], xy[1], L.CAR_REST_Z])
        _set_car(cars[keeper], pos, rot, np.zeros(3), float(rng.uniform(0.0, 100.0)), on_ground=True)
        placed.append(keeper)
        avoid.append(xy)


def _ball_in_third(
    arena: rsim.Arena,
    cars: list[rsim.Car],
    rng: np.random.Generator,
    own_third: bool,
    ball_max_speed: float,
    car_max_speed: float,
) -> tuple[int, Array, Array]:
    """Place the ball in a random car's own (``own_third``) or attacking third and that car on the
    midfield side of it, facing it (see :func:`defense` and :func:`attack`); ``(main, car_xy, ball_xy)``."""
    main = int(rng.integers(len(cars)))
    own = -1.0 if cars[main].team == rsim.Team.BLUE else 1.0  # the sign of y at the main car's own goal
    end = own if own_third else -own  # the sign of y at the end the ball is placed in
    ball_xy = np.array([rng.uniform(-3000.0, 3000.0), end * rng.uniform(2400.0, 4400.0)])
    car_xy = _car_behind_ball(arena, cars[main], rng, end, ball_xy, ball_max_speed, car_max_speed, (600.0, 2000.0))
    return main, car_xy, ball_xy


def _car_behind_ball(
    arena: rsim.Arena,
    car: rsim.Car,
    rng: np.random.Generator,
    end: float,
    ball_xy: Array,
    ball_max_speed: float,
    car_max_speed: float,
    distance: tuple[float, float],
) -> Array:
    """Put ``car`` on the floor ``distance`` uu (min, max) from ``ball_xy``, on the midfield side of it
    (``end``: the sign of y at the ball's end), facing it, and the ball at ``ball_xy`` rolling at
    0..``ball_max_speed`` uu/s; returns the car's (x, y)."""
    for _ in range(100):  # keep the car inside the field (walls and corners, 300 uu margin)
        angle = -end * np.pi / 2 + float(rng.uniform(-np.pi / 3, np.pi / 3))  # around straight to midfield
        car_xy = ball_xy + float(rng.uniform(*distance)) * np.array([np.cos(angle), np.sin(angle)])
        if _within_field(float(car_xy[0]), float(car_xy[1]), 300.0, L.BACK_WALL_Y - 300.0):
            break
    else:  # never in practice: straight to midfield from any ball spot fits
        car_xy = ball_xy + np.array([0.0, -end * 600.0])
    to_ball = ball_xy - car_xy
    yaw = float(np.arctan2(to_ball[1], to_ball[0]) + rng.uniform(-np.pi / 4, np.pi / 4))
    heading = np.array([np.cos(yaw), np.sin(yaw), 0.0])
    speed = float(rng.uniform(0.0, car_max_speed))
    pos = np.array([car_xy[0], car_xy[1], L.CAR_REST_Z])
    rot = rsim.Angle(yaw, 0.0, 0.0).as_rot_mat()
    _set_car(car, pos, rot, heading * speed, float(rng.uniform(0.0, 100.0)), on_ground=True)
    direction = float(rng.uniform(-np.pi, np.pi))
    ball_speed = float(rng.uniform(0.0, ball_max_speed))
    ball_vel = ball_speed * np.array([np.cos(direction), np.sin(direction), 0.0])
    _set_ball(arena, np.array([*ball_xy, L.BALL_REST_Z]), ball_vel)
    placed_xy: Array = np.asarray(car_xy, np.float64)
    return placed_xy


# ---------------------------------------------------------------------- helpers
def _inside_field(rng: np.random.Generator, margin: float, max_abs_y: float) -> tuple[float, float]:
    """A random (x, y) inside the field: within the side and back walls and inside the 45-degree
    corner walls (``|x| + |y| <= CORNER_SUM``), ``margin`` away from each."""
    while True:
        x = float(rng.uniform(-L.SIDE_WALL_X + margin, L.SIDE_WALL_X - margin))
        y = float(rng.uniform(-max_abs_y, max_abs_y))
        if _within_field(x, y, margin, max_abs_y):
            return x, y


def _within_field(x: float, y: float, margin: float, max_abs_y: float) -> bool:
    """(x, y) lies ``margin`` inside the side walls and the corner walls (``1.5 * margin`` from those)
    and within ``|y| <= max_abs_y``."""
    return abs(x) <= L.SIDE_WALL_X - margin and abs(y) <= max_abs_y and abs(x) + abs(y) <= L.CORNER_SUM - margin * 1.5


def _spread_xy(
    rng: np.random.Generator, margin: float, max_abs_y: float, avoid: list[Array], min_distance: float
) -> Array:
    """:func:`_inside_field`, at least ``min_distance`` uu from every point of ``avoid`` (best of 50 tries)."""
    best, best_gap = np.zeros(2), -1.0
    for _ in range(50):
        xy = np.array(_inside_field(rng, margin, max_abs_y))
        gap = min((float(np.linalg.norm(xy - p)) for p in avoid), default=np.inf)
        if gap >= min_distance:
            return xy
        if gap > best_gap:
            best, best_gap = xy, gap
    return best


def _wait_on_ground(cars: list[rsim.Car], placed: list[int], rng: np.random.Generator, avoid: list[Array]) -> None:
    """Every car not in ``placed`` stands still on the floor, facing a random way, away from ``avoid``."""
    taken = list(avoid)
    for index, car in enumerate(cars):
        if index in placed:
            continue
        xy = _spread_xy(rng, 400.0, L.BACK_WALL_Y - 400.0, taken, OTHER_CARS_MIN_DISTANCE)
        taken.append(xy)
        rot = rsim.Angle(float(rng.uniform(-np.pi, np.pi)), 0.0, 0.0).as_rot_mat()
        _set_car(car, np.array([xy[0], xy[1], L.CAR_REST_Z]), rot, np.zeros(3), float(rng.uniform(0.0, 100.0)), True)


def _random_vector(rng: np.random.Generator, max_norm: float, min_norm: float = 0.0) -> Array:
    direction = rng.normal(size=3)
    direction /= max(float(np.linalg.norm(direction)), 1e-6)
    return direction * rng.uniform(min_norm, max_norm)


def _perpendicular(rng: np.random.Generator, axis: Array) -> Array:
    """A random unit vector perpendicular to the unit vector ``axis``."""
    while True:
        v = rng.normal(size=3)
        v -= axis * float(v @ axis)
        norm = float(np.linalg.norm(v))
        if norm > 1e-3:
            return v / norm


def _vec(v: Array) -> rsim.Vec:
    return rsim.Vec(float(v[0]), float(v[1]), float(v[2]))


def _rot(forward: Array, up: Array) -> rsim.RotMat:
    """The orientation with this up vector and ``forward`` projected perpendicular to it.

    RocketSim's frame is left-handed: ``right = up x forward`` (facing +x with up +z, right is +y).
    """
    u = up / np.linalg.norm(up)
    f = forward - u * float(forward @ u)
    f /= np.linalg.norm(f)
    return rsim.RotMat(_vec(f), _vec(np.cross(u, f)), _vec(u))


def _roof_height(car: rsim.Car) -> float:
    """Distance (uu) from the car's origin to its roof along its up vector: hitbox offset z + height / 2."""
    config = car.get_config()
    return float(config.hitbox_pos_offset.z + config.hitbox_size.z / 2.0)


def _set_car(
    car: rsim.Car,
    pos: Array,
    rot: rsim.RotMat,
    vel: Array,
    boost: float,
    on_ground: bool,
    flip_used: bool = False,
) -> None:
    """Replace the car's state: no spin; a car in the air has used its jump (and its flip if ``flip_used``)."""
    state = rsim.CarState()
    state.pos = _vec(pos)
    state.rot_mat = rot
    state.vel = _vec(vel)
    state.ang_vel = rsim.Vec(0.0, 0.0, 0.0)
    state.boost = boost
    state.is_on_ground = on_ground
    state.has_jumped = not on_ground
    state.has_double_jumped = flip_used
    car.set_state(state)


def _set_ball(arena: rsim.Arena, pos: Array, vel: Array) -> None:
    ball = rsim.BallState()
    ball.pos = _vec(pos)
    ball.vel = _vec(vel)
    ball.ang_vel = rsim.Vec(0.0, 0.0, 0.0)
    arena.ball.set_state(ball)


# ---------------------------------------------------------------------- registry and options
def _check_matches_registry(setters: Mapping[str, StateSetter]) -> None:
    """Raise ``RuntimeError`` unless ``setters`` match :mod:`speedflip.registry` exactly.

    The config checks setter names and options against the light registry (which does not load
    RocketSim); this keeps the two in step: same names in the same order, and each setter's
    keyword-only parameters are the registry's options with the same defaults.
    """
    if tuple(setters) != STATE_SETTER_NAMES:
        raise RuntimeError(f"state setters {list(setters)} differ from speedflip.registry's {list(STATE_SETTER_NAMES)}")
    for name, fn in setters.items():
        params = inspect.signature(fn).parameters.values()
        options = {p.name: p.default for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}
        if options != SETTER_OPTIONS[name]:
            raise RuntimeError(
                f"state setter '{name}' takes options {options}; speedflip.registry lists {SETTER_OPTIONS[name]}"
            )


STATE_SETTERS: dict[str, StateSetter] = {
    "kickoff": kickoff,
    "random": random_state,
    "random_ground": random_ground,
    "turtled": turtled,
    "wall": wall,
    "air_dribble": air_dribble,
    "flip_reset": flip_reset,
    "jump_challenge": jump_challenge,
    "defense": defense,
    "attack": attack,
    "end_line": end_line,
}

_check_matches_registry(STATE_SETTERS)


def make_setter(name: str, options: Mapping[str, OptionValue] | None = None) -> StateSetter:
    """Setter ``name`` with ``options`` bound (checked with :func:`check_setter_options`)."""
    if not options:
        return STATE_SETTERS[name]
    check_setter_options({name: options})
    return partial(STATE_SETTERS[name], **options)


def mechanics_lane(share: float, arena_offset: int, num_arenas: int) -> Array:
    """``[num_arenas]`` bool: which arenas are in the mechanics lane, by global arena index ``g``.

    Arena ``g`` is in the lane when ``floor((g + 1) * share) > floor(g * share)``: the lane holds
    ``floor(K * share)`` of arenas ``0..K-1``, spread evenly over the pool (so over the workers of the
    multi-process collector too), and any process that owns a slice of the pool computes the same
    answer from its ``arena_offset`` alone.
    """
    g = np.arange(arena_offset, arena_offset + num_arenas, dtype=np.float64)
    eps = 1e-9  # 0.1 * 10 must count as 1
    lane: Array = np.floor((g + 1.0) * share + eps) > np.floor(g * share + eps)
    return lane
