"""An example scripted bot for `speedflip eval py:examples/chase_bot.py:act rule`.

It drives every car it controls straight at the ball, boosting when it faces it.
"""

import numpy as np


def act(state: dict[str, np.ndarray]) -> np.ndarray:
    n = state["car_position"].shape[0]
    controls = np.zeros((n, 8), np.float32)
    to_ball = state["ball_position"][None, :2] - state["car_position"][:, :2]
    to_ball /= np.maximum(np.linalg.norm(to_ball, axis=1, keepdims=True), 1e-6)
    forward = state["car_forward"][:, :2]
    # in RocketSim's world frame positive steer turns the car counter-clockwise seen from above,
    # so steer with the sign of the z component of forward x to_ball
    cross = forward[:, 0] * to_ball[:, 1] - forward[:, 1] * to_ball[:, 0]
    facing = np.sum(forward * to_ball, axis=1)
    controls[:, 0] = 1.0  # throttle
    controls[:, 1] = np.clip(cross * 4.0, -1.0, 1.0)  # steer
    controls[:, 6] = (facing > 0.95).astype(np.float32)  # boost
    return controls
