"""A user's own scripted bot as a match player: ``py:path/to/file.py:function``.

The function is called once per decision (every ``tick_skip`` ticks) and per arena with a dict of
numpy arrays, all in world coordinates (blue defends -y, orange defends +y), units uu, uu/s, rad/s:

==========================  =========  ============================================
key                         shape      meaning
==========================  =========  ============================================
``ball_position``           [3]        ball centre
``ball_velocity``           [3]
``ball_angular_velocity``   [3]
``car_position``            [C, 3]     every car of the arena, blue cars first
``car_velocity``            [C, 3]
``car_angular_velocity``    [C, 3]
``car_forward``             [C, 3]     unit vector out of the car's nose
``car_up``                  [C, 3]     unit vector out of the car's roof
``car_boost``               [C]        0..100
``car_on_ground``           [C]        1.0 or 0.0
``car_is_demoed``           [C]        1.0 or 0.0
``car_team``                [C]        0 blue, 1 orange
``controlled``              [C]        True for the cars this bot drives
==========================  =========  ============================================

It returns controls ``[C, 8]``: throttle, steer, pitch, yaw, roll in [-1, 1] and jump, boost,
handbrake (pressed when > 0.5); rows of cars it does not drive are ignored. Values are clamped.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import numpy as np

from speedflip._types import Array
from speedflip.env import layout as L
from speedflip.env.actions import NUM_CONTROLS
from speedflip.env.arenas import GameArrays

BotFunction = Callable[[dict[str, Array]], Array]


class UserBotError(ValueError):
    """A ``py:FILE:FUNC`` bot that cannot be loaded or returned bad controls."""


def load_bot_function(spec: str) -> BotFunction:
    """``py:path/to/file.py:function`` -> the function."""
    body = spec.removeprefix("py:")
    path_text, sep, func_name = body.rpartition(":")
    if not sep or not path_text or not func_name:
        raise UserBotError(f"'{spec}' must look like py:path/to/file.py:function_name")
    path = Path(path_text)
    if not path.is_file():
        raise UserBotError(f"bot file '{path}' does not exist (from '{spec}')")
    module_spec = importlib.util.spec_from_file_location(f"speedflip_user_bot_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise UserBotError(f"cannot import '{path}' as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as err:  # a user's file can raise anything on import; report it plainly
        raise UserBotError(f"importing '{path}' failed: {type(err).__name__}: {err}") from None
    func = vars(module).get(func_name)
    if not callable(func):
        raise UserBotError(f"'{path}' has no function named '{func_name}'")
    bot: BotFunction = func
    return bot


def arena_view(state: GameArrays, k: int, car_teams: Array, controlled: Array) -> dict[str, Array]:
    """The documented per-arena dict (world frame, perspective 0)."""
    cars = state.cars[k, :, 0]
    ball = state.ball[k, 0]
    return {
        "ball_position": ball[L.BALL_POS].copy(),
        "ball_velocity": ball[L.BALL_VEL].copy(),
        "ball_angular_velocity": ball[L.BALL_ANG_VEL].copy(),
        "car_position": cars[:, L.CAR_POS].copy(),
        "car_velocity": cars[:, L.CAR_VEL].copy(),
        "car_angular_velocity": cars[:, L.CAR_ANG_VEL].copy(),
        "car_forward": cars[:, L.CAR_FORWARD].copy(),
        "car_up": cars[:, L.CAR_UP].copy(),
        "car_boost": cars[:, L.CAR_BOOST].copy(),
        "car_on_ground": cars[:, L.CAR_ON_GROUND].copy(),
        "car_is_demoed": cars[:, L.CAR_IS_DEMOED].copy(),
        "car_team": car_teams.copy(),
        "controlled": controlled.copy(),
    }


class UserBotPolicy:
    """Drives cars with raw controls from a user's function (see the module docstring)."""

    def __init__(self, spec: str) -> None:
        self.func = load_bot_function(spec)
        self.name = spec.removeprefix("py:")

    def controls(self, state: GameArrays, car_teams: Array, rows: Array) -> Array:
        """Controls ``[K * C, 8]`` for the agents in ``rows`` (bool ``[K * C]``), NaN elsewhere."""
        K, C = state.cars.shape[0], car_teams.shape[0]
        mine = rows.reshape(K, C)
        out = np.full((K, C, NUM_CONTROLS), np.nan, np.float32)
        for k in np.flatnonzero(mine.any(axis=1)).tolist():
            result = np.asarray(self.func(arena_view(state, k, car_teams, mine[k])), dtype=np.float32)
            if result.shape != (C, NUM_CONTROLS):
                raise UserBotError(
                    f"bot '{self.name}' returned controls of shape {list(result.shape)}; expected [{C}, 8] "
                    "(throttle, steer, pitch, yaw, roll, jump, boost, handbrake per car)"
                )
            if not np.all(np.isfinite(result[mine[k]])):
                raise UserBotError(f"bot '{self.name}' returned NaN or infinite controls: {result[mine[k]].tolist()}")
            out[k, mine[k]] = result[mine[k]]
        return out.reshape(K * C, NUM_CONTROLS)
