"""Column layout of RocketSim's ``Arena.get_gym_state()`` arrays and field constants.

``get_gym_state()`` returns ``(info, pads, ball, car_1, car_2, ...)``. Every array after ``info``
holds two rows: the normal view and the *inverted* view (the field rotated 180 degrees about the
z axis, as orange sees it when it attacks towards +y like blue does). speedflip keeps that second
axis as the "perspective" axis: index 0 = blue's view, 1 = orange's view.
"""

from __future__ import annotations

# info row: [game_mode, ball_last_hit_car_id, blue_score, orange_score]
INFO_LAST_HIT_CAR_ID = 1
INFO_BLUE_SCORE = 2
INFO_ORANGE_SCORE = 3

# ball row (25 floats)
BALL_WIDTH = 25
BALL_POS = slice(0, 3)
BALL_QUAT = slice(3, 7)
BALL_VEL = slice(7, 10)
BALL_ANG_VEL = slice(10, 13)

# car row (36 floats)
CAR_WIDTH = 36
CAR_ID = 0
CAR_TEAM = 1
CAR_GOALS = 2
CAR_SAVES = 3
CAR_SHOTS = 4
CAR_DEMOS = 5
CAR_BOOST_PICKUPS = 6
CAR_IS_DEMOED = 7
CAR_ON_GROUND = 8
CAR_HIT_LAST_STEP = 9
CAR_BOOST = 10  # 0..100
CAR_POS = slice(11, 14)
CAR_QUAT = slice(14, 18)
CAR_VEL = slice(18, 21)
CAR_ANG_VEL = slice(21, 24)
CAR_FORWARD = slice(24, 27)
CAR_RIGHT = slice(27, 30)
CAR_UP = slice(30, 33)
CAR_PYR = slice(33, 36)

NUM_BOOST_PADS = 34

# field (unreal units, uu)
TICK_RATE = 120
SIDE_WALL_X = 4096.0
BACK_WALL_Y = 5120.0
CEILING_Z = 2044.0
CORNER_SUM = 8064.0  # the corner walls lie on |x| + |y| = 8064
GOAL_HEIGHT = 642.775
GOAL_POST_X = 892.755  # uu: the posts of both goals stand at |x| = 892.755
GOAL_CENTER_Z = GOAL_HEIGHT / 2
BALL_RADIUS = 91.25
BALL_REST_Z = 93.15
CAR_REST_Z = 17.0
CAR_MAX_SPEED = 2300.0
BALL_MAX_SPEED = 6000.0
CAR_MAX_ANG_VEL = 5.5
GRAVITY_Z = -650.0

BLUE = 0
ORANGE = 1
