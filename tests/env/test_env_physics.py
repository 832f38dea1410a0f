"""The simulator underneath is the real RocketSim: gravity, floor bounce, ball freeze, mirrored views."""

from __future__ import annotations

import numpy as np
import pytest
import RocketSim as rsim

from speedflip.env import layout as L
from speedflip.env.arenas import Arenas


def _drop_ball(arenas: Arenas, z: float, vz: float) -> None:
    ball = rsim.BallState()
    ball.pos = rsim.Vec(0.0, 0.0, z)
    ball.vel = rsim.Vec(0.0, 0.0, vz)
    ball.ang_vel = rsim.Vec(0.0, 0.0, 0.0)
    arenas.arenas[0].ball.set_state(ball)


def test_ball_falls_with_rl_gravity_and_bounces() -> None:
    """A dropped ball accelerates at -650 uu/s^2, lands on the floor and bounces lower than it fell.

    Hand computation for t = 0.5 s of free fall from 1000 uu: v = -650 * 0.5 = -325 uu/s and
    z = 1000 - 650 * 0.5**2 / 2 = 918.75 uu. RocketSim adds a small air drag (about 1% here) and
    integrates in 1/120 s ticks, hence the tolerances.

    The ball starts with a negligible -0.001 uu/s: a ball with *exactly* zero velocity is frozen in
    place in Rocket League (the kickoff rule), see ``test_ball_at_exact_rest_is_frozen``.
    """
    arenas = Arenas(num_arenas=1, blue_size=0, orange_size=0)
    _drop_ball(arenas, z=1000.0, vz=-1e-3)
    arenas.step_physics_only(60)  # 0.5 s
    ball = arenas.read_all().ball[0, 0]
    assert ball[L.BALL_VEL][2] == pytest.approx(-325.0, abs=5.0)
    assert ball[L.BALL_POS][2] == pytest.approx(1000.0 - 81.25, abs=2.5)
    np.testing.assert_allclose(ball[L.BALL_POS][:2], 0.0, atol=1e-3)

    heights, vz = [], []
    for _ in range(240):  # 2 more seconds: the floor is reached after ~1.3 s of fall
        arenas.step_physics_only(1)
        state = arenas.arenas[0].ball.get_state()
        heights.append(state.pos.z)
        vz.append(state.vel.z)
    heights_a, vz_a = np.array(heights), np.array(vz)
    assert vz_a.min() < -700.0, "the ball kept accelerating downwards until it hit the floor"
    bounce = int(np.argmax(vz_a > 0.0))
    assert vz_a[bounce] > 0.0, "the ball never bounced back up"
    assert heights_a[bounce] < L.BALL_RADIUS + 30.0, "the bounce happened at the floor"
    assert heights_a.min() > L.BALL_RADIUS - 5.0, "the ball did not sink through the floor"
    peak = heights_a[bounce:].max()
    assert 300.0 < peak < 1000.0 - 100.0, f"bounce peak {peak} should be clearly below the drop height"


def test_ball_at_exact_rest_is_frozen() -> None:
    """Rocket League holds a ball with zero velocity in place (kickoff); RocketSim reproduces that."""
    arenas = Arenas(num_arenas=1, blue_size=0, orange_size=0)
    _drop_ball(arenas, z=1000.0, vz=0.0)
    arenas.step_physics_only(60)
    ball = arenas.read_all().ball[0, 0]
    assert ball[L.BALL_POS][2] == pytest.approx(1000.0)
    assert ball[L.BALL_VEL][2] == pytest.approx(0.0)


def test_perspective_one_is_the_field_rotated_about_z() -> None:
    """Row 1 of every gym array is the field rotated 180 degrees about z: x -> -x, y -> -y, z kept."""
    arenas = Arenas(num_arenas=1, blue_size=1, orange_size=1)
    ball = rsim.BallState()
    ball.pos = rsim.Vec(1000.0, -2000.0, 500.0)
    ball.vel = rsim.Vec(300.0, 400.0, -100.0)
    arenas.arenas[0].ball.set_state(ball)
    car = rsim.CarState()
    car.pos = rsim.Vec(-1500.0, 700.0, L.CAR_REST_Z)
    car.vel = rsim.Vec(100.0, -200.0, 0.0)
    car.rot_mat = rsim.Angle(0.3, 0.0, 0.0).as_rot_mat()
    arenas.cars[0][0].set_state(car)
    st = arenas.read_all()
    flip = np.array([-1.0, -1.0, 1.0], np.float32)
    np.testing.assert_allclose(st.ball[0, 0, L.BALL_POS], [1000.0, -2000.0, 500.0], atol=1e-3)
    np.testing.assert_allclose(st.ball[0, 1, L.BALL_POS], st.ball[0, 0, L.BALL_POS] * flip, atol=1e-3)
    np.testing.assert_allclose(st.ball[0, 1, L.BALL_VEL], st.ball[0, 0, L.BALL_VEL] * flip, atol=1e-3)
    blue = st.cars[0, 0]
    np.testing.assert_allclose(blue[0, L.CAR_POS], [-1500.0, 700.0, L.CAR_REST_Z], atol=1e-3)
    for cols in (L.CAR_POS, L.CAR_VEL, L.CAR_FORWARD, L.CAR_RIGHT, L.CAR_UP):
        np.testing.assert_allclose(blue[1, cols], blue[0, cols] * flip, atol=1e-5)
    # forward of yaw 0.3 is (cos 0.3, sin 0.3, 0)
    np.testing.assert_allclose(blue[0, L.CAR_FORWARD], [np.cos(0.3), np.sin(0.3), 0.0], atol=1e-5)
    assert st.cars[0, 0, 0, L.CAR_TEAM] == L.BLUE
    assert st.cars[0, 1, 0, L.CAR_TEAM] == L.ORANGE
