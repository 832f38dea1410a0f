"""Evaluation-only opponents: scripted bots that training never sees (no preset, pool or curriculum uses them).

They are ``py:FILE:FUNC`` user bots (the state dict and the controls are documented in
``src/speedflip/selfplay/userbot.py``)::

    speedflip eval RUN py:benchmarks/eval_opponents.py:ball_chaser
    speedflip eval RUN py:benchmarks/eval_opponents.py:goalie
    speedflip eval RUN py:benchmarks/eval_opponents.py:bumper
    speedflip eval RUN py:benchmarks/eval_opponents.py:shadow

Their styles differ on purpose from the rule bot that training plays against
(``src/speedflip/selfplay/rule_policy.py``, which lines up behind the ball towards the opponent goal,
retreats when the ball is behind it, and only ever steers at -1/0/1 on the lookup table):

- ``ball_chaser``: no positioning at all. It drives straight at where the ball is about to be, boosting
  whenever it roughly faces it, and jumps then front-flips into the ball when it is close: fast, loose
  hits in whatever direction it happens to come from, and early challenges at every kickoff.
- ``goalie``: never attacks. It parks on the line from the centre of its own goal to the ball, close to
  the goal mouth, turns to face the ball, and only leaves that spot to clear a ball that comes near its
  goal (hitting it from the goal side, with a jump for a ball in the air); it retreats to the goal
  mouth with boost whenever it is out of position.

- ``bumper``: never plays the ball on purpose. It hunts the nearest opponent car, driving at where that car
  will be shortly with boost whenever it roughly faces it and has boost left: bumps, and a demolition when it
  arrives at supersonic speed. Against it the bot has to keep playing the ball while being hit and respawning.
- ``shadow``: a defender that gives ground instead of guarding the goal mouth. It keeps a spot goal-side of the
  ball (``SHADOW_DISTANCE`` uu back along the line from the ball to its own goal), following the ball up and down
  the field and facing it, and challenges only when the ball comes to it: the ball in its own third, or the ball
  close in front of it (goal-side of the ball, within ``CHALLENGE_DISTANCE`` uu): then it drives through the ball
  towards the opponent goal with boost, and jumps at a ball in reach in the air.

All four play either side: every target is computed in the car's own frame of the field, where its own goal
is at -y (a blue car's frame is the world; an orange car's is the world turned half a turn about z).
Controls are relative to the car, so they need no mirroring. Analog steering and throttle, unlike the
lookup-table rule bot. Stateless: each decision depends only on the state given.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]

BACK_WALL_Y = 5120.0
GOAL_HALF_WIDTH = 893.0
BALL_RADIUS = 92.75
CAR_REST_Z = 17.0
SHADOW_DISTANCE = 1400.0  # shadow: how far goal-side of the ball it waits
CHALLENGE_DISTANCE = 900.0  # shadow: a ball this close in front of it is challenged

# controls columns
THROTTLE, STEER, PITCH, YAW, ROLL, JUMP, BOOST, HANDBRAKE = range(8)


def _frame_flip(car_team: Array) -> Array:
    """``[C, 3]`` factors that turn world vectors into each car's own frame: x and y mirrored for orange cars
    (half a turn about z), z kept."""
    sign = np.where(car_team == 0, 1.0, -1.0).astype(np.float64)[:, None]  # [C, 1]
    return np.concatenate([sign, sign, np.ones_like(sign)], axis=1)


def _own_frame(state: dict[str, Array]) -> dict[str, Array]:
    """Per-car views with the car's own goal at -y: positions/velocities/directions of ball and cars
    turned half a turn about z for orange cars. Arrays ``[C, 3]`` (the ball repeated per car)."""
    flip = _frame_flip(state["car_team"])
    return {
        "ball_pos": state["ball_position"][None, :] * flip,
        "ball_vel": state["ball_velocity"][None, :] * flip,
        "pos": state["car_position"] * flip,
        "vel": state["car_velocity"] * flip,
        "fwd": state["car_forward"] * flip,
    }


def _steer_towards(pos: Array, fwd: Array, target: Array, gain: float = 3.0) -> tuple[Array, Array, Array]:
    """Steer in [-1, 1] that turns each car towards its target (xy), the cosine of the angle to it and the
    distance. Positive steer turns counter-clockwise seen from above (as in examples/chase_bot.py), which
    the half-turn to the car's own frame keeps."""
    rel = target[:, :2] - pos[:, :2]
    dist = np.linalg.norm(rel, axis=1)
    direction = rel / np.maximum(dist, 1e-6)[:, None]
    f = fwd[:, :2] / np.maximum(np.linalg.norm(fwd[:, :2], axis=1, keepdims=True), 1e-6)
    cross = f[:, 0] * direction[:, 1] - f[:, 1] * direction[:, 0]
    facing = np.sum(f * direction, axis=1)
    # behind the car: full lock towards the nearer side (cross alone is small when the target is right behind)
    steer = np.where(facing < 0.0, np.where(cross >= 0.0, 1.0, -1.0), np.clip(cross * gain, -1.0, 1.0))
    return steer, facing, dist


def _cross(pos: Array, fwd: Array, target: Array) -> Array:
    """z of (unit nose) x (unit direction to the target), xy only: positive when the target is to the left."""
    rel = target[:, :2] - pos[:, :2]
    direction = rel / np.maximum(np.linalg.norm(rel, axis=1), 1e-6)[:, None]
    f = fwd[:, :2] / np.maximum(np.linalg.norm(fwd[:, :2], axis=1, keepdims=True), 1e-6)
    return np.asarray(f[:, 0] * direction[:, 1] - f[:, 1] * direction[:, 0])


def _reverse_where(
    reverse: Array, throttle: Array, steer: Array, pos: Array, fwd: Array, target: Array
) -> tuple[Array, Array]:
    """Throttle and steer with the cars in ``reverse`` backing to their target at full throttle. Reversing turns
    the car the other way round: steering with the cross product of the nose and the target (not the full lock of
    :func:`_steer_towards`) swings the rear towards the target."""
    throttle = np.where(reverse, -1.0, throttle)
    steer = np.where(reverse, _cross(pos, fwd, target) * 3.0, steer).clip(-1.0, 1.0)
    return throttle, steer


def ball_chaser(state: dict[str, Array]) -> Array:
    """Straight at the ball with boost; jump and front-flip into it when close."""
    n = state["car_position"].shape[0]
    v = _own_frame(state)
    controls = np.zeros((n, 8), np.float32)
    # aim where the ball will be shortly (more lead when far away), no thought for the direction of the hit
    lead = np.clip(np.linalg.norm(v["ball_pos"][:, :2] - v["pos"][:, :2], axis=1) / 2300.0, 0.0, 0.6)[:, None]
    target = v["ball_pos"] + v["ball_vel"] * lead
    steer, facing, dist = _steer_towards(v["pos"], v["fwd"], target, gain=4.0)
    on_ground = state["car_on_ground"] > 0.5
    controls[:, THROTTLE] = 1.0
    controls[:, STEER] = steer
    controls[:, YAW] = steer
    controls[:, BOOST] = (facing > 0.7).astype(np.float32)
    controls[:, HANDBRAKE] = ((facing < -0.3) & on_ground).astype(np.float32)  # powerslide round to the ball

    ball_height = v["ball_pos"][:, 2] - v["pos"][:, 2]
    close = (dist < 450.0) & (facing > 0.6) & (ball_height < 350.0)
    height_off_ground = v["pos"][:, 2] - CAR_REST_Z
    # on the ground: first jump; in the air, shortly after: jump released for a moment, then pressed
    # again with the nose down = a front flip into the ball (stateless: the car's height tells the phase)
    first_jump = close & on_ground
    flip = close & ~on_ground & (height_off_ground > 45.0) & (height_off_ground < 250.0)
    controls[:, JUMP] = (first_jump | flip).astype(np.float32)
    controls[:, PITCH] = np.where(flip, -1.0, 0.0)
    controls[:, YAW] = np.where(flip, 0.0, controls[:, YAW])
    return controls


def goalie(state: dict[str, Array]) -> Array:
    """Between the ball and its own goal; clears the ball when it comes near the goal."""
    n = state["car_position"].shape[0]
    v = _own_frame(state)
    controls = np.zeros((n, 8), np.float32)
    ball, pos, vel, fwd = v["ball_pos"], v["pos"], v["vel"], v["fwd"]
    goal = np.array([0.0, -BACK_WALL_Y, 0.0])

    # the guard spot: on the segment from the goal centre to the ball, a little in front of the goal line,
    # further out when the ball is far away ...
    to_ball = ball[:, :2] - goal[None, :2]
    ball_from_goal = np.linalg.norm(to_ball, axis=1)
    unit = to_ball / np.maximum(ball_from_goal, 1e-6)[:, None]
    out = np.clip(ball_from_goal * 0.25, 300.0, 1200.0)
    guard = np.zeros_like(ball)
    guard[:, :2] = goal[None, :2] + unit * out[:, None]
    guard[:, 0] = np.clip(guard[:, 0], -GOAL_HALF_WIDTH + 150.0, GOAL_HALF_WIDTH - 150.0)
    # ... or, for a ball coming at the goal, where it will cross the line just in front of the goal mouth
    block_y = -BACK_WALL_Y + 350.0
    ball_speed_to_goal = -v["ball_vel"][:, 1]
    incoming = (ball_speed_to_goal > 300.0) & (ball[:, 1] < 1000.0)
    t_cross = np.clip((ball[:, 1] - block_y) / np.maximum(ball_speed_to_goal, 1.0), 0.0, 3.0)
    cross_x = np.clip(ball[:, 0] + v["ball_vel"][:, 0] * t_cross, -GOAL_HALF_WIDTH + 120.0, GOAL_HALF_WIDTH - 120.0)
    guard[:, 0] = np.where(incoming, cross_x, guard[:, 0])
    guard[:, 1] = np.where(incoming, block_y, guard[:, 1])

    # clear: the ball is near the goal, low enough to hit, not a fast shot the car should rather block, and the
    # car is goal-side of it
    car_to_ball = np.linalg.norm(ball[:, :2] - pos[:, :2], axis=1)
    goal_side = pos[:, 1] < ball[:, 1] - 50.0
    reachable = (ball[:, 2] < 300.0) | (car_to_ball < 500.0)
    near_goal = (ball_from_goal < 2300.0) & ((ball_speed_to_goal < 900.0) | (car_to_ball < 900.0))
    clear = (near_goal | (ball_from_goal < 1200.0)) & goal_side & reachable
    # hit the ball from the goal side, pushing it away from the goal (towards the ball's own side of the field)
    push = ball[:, :2] - goal[None, :2]
    push /= np.maximum(np.linalg.norm(push, axis=1, keepdims=True), 1e-6)
    clear_point = ball.copy()
    clear_point[:, :2] = ball[:, :2] - push * 60.0
    target = np.where(clear[:, None], clear_point, guard)
    steer, facing, dist = _steer_towards(pos, fwd, target, gain=3.5)
    on_ground = state["car_on_ground"] > 0.5
    speed = np.linalg.norm(vel[:, :2], axis=1)

    # drive to the target; near the guard spot, slow to a stop and then turn to face the ball
    parked = ~clear & (dist < 250.0)
    throttle = np.where(parked, np.clip(-np.sum(vel[:, :2] * fwd[:, :2], axis=1) / 500.0, -1.0, 1.0), 1.0)
    approaching = ~clear & ~parked & (dist < 1200.0)
    throttle = np.where(approaching, np.clip(dist / 1200.0 + 0.2, 0.2, 1.0), throttle)
    # a target right behind and close: reverse to it instead of turning round
    reverse = ~clear & (facing < -0.6) & (dist < 1500.0)
    throttle, steer = _reverse_where(reverse, throttle, steer, pos, fwd, target)
    face_steer, _, _ = _steer_towards(pos, fwd, ball, gain=3.0)
    # turning to face the ball moves the car: only while no shot is coming
    settle = parked & (speed < 400.0) & ~incoming
    steer = np.where(settle, face_steer, steer)
    throttle = np.where(settle & (np.abs(face_steer) > 0.3), 0.4, throttle)

    controls[:, THROTTLE] = throttle
    controls[:, STEER] = steer
    controls[:, YAW] = steer
    far_back = ~clear & (dist > 1500.0) & (facing > 0.8)  # out of position: hurry back
    controls[:, BOOST] = ((clear & (facing > 0.85) & (dist > 500.0)) | far_back).astype(np.float32)
    controls[:, HANDBRAKE] = ((facing < -0.2) & ~reverse & on_ground & (speed > 500.0)).astype(np.float32)

    # a ball in the air within reach while clearing or guarding: jump at it
    ball_height = ball[:, 2] - pos[:, 2]
    # a ball in the air arriving within a few tenths of a second (or just beside the car): jump into its path
    closing = np.sum((ball[:, :2] - pos[:, :2]) * (vel[:, :2] - v["ball_vel"][:, :2]), axis=1) / np.maximum(
        car_to_ball, 1.0
    )
    arriving = (car_to_ball < 350.0) | ((closing > 0.0) & (car_to_ball / np.maximum(closing, 1.0) < 0.35))
    in_reach = arriving & (ball_height > 90.0) & (ball_height < 420.0)
    controls[:, JUMP] = (in_reach & on_ground).astype(np.float32)
    return controls


def bumper(state: dict[str, Array]) -> Array:
    """At the nearest opponent car with boost, never at the ball: bumps and demolitions."""
    n = state["car_position"].shape[0]
    v = _own_frame(state)
    pos, fwd = v["pos"], v["fwd"]
    controls = np.zeros((n, 8), np.float32)
    team = state["car_team"]
    # every car's nearest opponent (in the car's own frame: turning the field does not change distances)
    gaps = np.linalg.norm(state["car_position"][:, None, :2] - state["car_position"][None, :, :2], axis=2)
    gaps = np.where(team[:, None] != team[None, :], gaps, np.inf)
    gaps = np.where(state["car_is_demoed"][None, :] > 0.5, np.inf, gaps)  # a demolished car is not there to hit
    if not np.isfinite(gaps).any():
        controls[:, THROTTLE] = 1.0  # nobody to hunt (no opponent, or it is demolished): roll on
        return controls
    prey = np.argmin(gaps, axis=1)
    # the prey's position and velocity in this car's own frame (turned by this car's sign, not the prey's)
    flip = _frame_flip(team)
    prey_pos = state["car_position"][prey] * flip
    prey_vel = state["car_velocity"][prey] * flip
    dist_now = np.linalg.norm(prey_pos[:, :2] - pos[:, :2], axis=1)
    lead = np.clip(dist_now / 2300.0, 0.0, 0.8)[:, None]
    target = prey_pos + prey_vel * lead
    steer, facing, _ = _steer_towards(pos, fwd, target, gain=4.0)
    on_ground = state["car_on_ground"] > 0.5
    controls[:, THROTTLE] = 1.0
    controls[:, STEER] = steer
    controls[:, YAW] = steer
    controls[:, BOOST] = ((facing > 0.8) & (state["car_boost"] > 0.0)).astype(np.float32)
    controls[:, HANDBRAKE] = ((facing < -0.3) & on_ground).astype(np.float32)
    return controls


def shadow(state: dict[str, Array]) -> Array:
    """Goal-side of the ball at a distance, facing it; challenges only a ball that comes to it."""
    n = state["car_position"].shape[0]
    v = _own_frame(state)
    controls = np.zeros((n, 8), np.float32)
    ball, pos, vel, fwd = v["ball_pos"], v["pos"], v["vel"], v["fwd"]
    own_goal = np.array([0.0, -BACK_WALL_Y, 0.0])
    opponent_goal = np.array([0.0, BACK_WALL_Y, 0.0])

    # the shadow spot: SHADOW_DISTANCE back from the ball towards the own goal's centre, never behind the goal line
    to_goal = own_goal[None, :2] - ball[:, :2]
    unit_to_goal = to_goal / np.maximum(np.linalg.norm(to_goal, axis=1), 1e-6)[:, None]
    spot = np.zeros_like(ball)
    spot[:, :2] = ball[:, :2] + unit_to_goal * SHADOW_DISTANCE
    spot[:, 1] = np.maximum(spot[:, 1], -BACK_WALL_Y + 300.0)

    car_to_ball = np.linalg.norm(ball[:, :2] - pos[:, :2], axis=1)
    goal_side = pos[:, 1] < ball[:, 1] - 50.0
    in_own_third = ball[:, 1] < -BACK_WALL_Y / 3.0
    challenge = goal_side & (in_own_third | (car_to_ball < CHALLENGE_DISTANCE)) & (ball[:, 2] < 400.0)
    # a challenge drives through the ball towards the opponent goal: aim at a point just behind it on that line
    to_opponent = opponent_goal[None, :2] - ball[:, :2]
    to_opponent /= np.maximum(np.linalg.norm(to_opponent, axis=1, keepdims=True), 1e-6)
    hit_point = ball.copy()
    hit_point[:, :2] = ball[:, :2] - to_opponent * 80.0
    target = np.where(challenge[:, None], hit_point, spot)
    steer, facing, dist = _steer_towards(pos, fwd, target, gain=3.5)
    on_ground = state["car_on_ground"] > 0.5
    speed = np.linalg.norm(vel[:, :2], axis=1)

    # to the spot: full throttle when far, easing off near it, stopping on it; a spot right behind: reverse
    throttle = np.where(challenge, 1.0, np.clip(dist / 1000.0, 0.0, 1.0))
    reverse = ~challenge & (facing < -0.6) & (dist < 1200.0)
    throttle, steer = _reverse_where(reverse, throttle, steer, pos, fwd, target)
    # on the spot: turn to face the ball (slowly, so the spot is kept)
    on_spot = ~challenge & (dist < 250.0)
    face_steer, _, _ = _steer_towards(pos, fwd, ball, gain=3.0)
    steer = np.where(on_spot, face_steer, steer)
    throttle = np.where(on_spot, np.where(np.abs(face_steer) > 0.3, 0.3, 0.0), throttle)

    controls[:, THROTTLE] = throttle
    controls[:, STEER] = steer
    controls[:, YAW] = steer
    controls[:, BOOST] = ((challenge & (facing > 0.85)) | (~challenge & (dist > 2000.0) & (facing > 0.9))).astype(
        np.float32
    )
    controls[:, HANDBRAKE] = ((facing < -0.2) & ~reverse & on_ground & (speed > 500.0)).astype(np.float32)
    # a ball in the air within reach during a challenge: jump at it
    ball_height = ball[:, 2] - pos[:, 2]
    in_reach = challenge & (car_to_ball < 400.0) & (ball_height > 100.0) & (ball_height < 400.0)
    controls[:, JUMP] = (in_reach & on_ground).astype(np.float32)
    return controls
