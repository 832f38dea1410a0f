"""The names of the env's registries (reward components, state setters and their options), without
the physics engine.

The config layer checks ``env.rewards``, reward phases, ``env.state_setters``, ``env.mechanics_setters``
and ``env.state_setter_options`` against this module, so ``import speedflip.config`` (and everything that
only needs a config: the algorithms, a CartPole run, ``speedflip doctor``) never loads RocketSim.

:mod:`speedflip.env.states` holds the setters themselves and checks at import time that its registry
matches this one exactly (same names, and each setter's keyword-only parameters are the options listed
here with the same defaults), so the two cannot drift apart silently.

Nothing here may import RocketSim (``tests/test_layering.py`` checks it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

OptionValue = float | bool

REWARD_NAMES: tuple[str, ...] = (
    "goal", "goal_scored", "goal_conceded", "touch", "shot", "save", "demo", "demoed", "strong_hit",
    "jump_shot", "basic_shot", "aimed_touch", "aimed_hit", "on_target_touch", "own_goal_touch", "own_goal",
    "velocity_player_to_ball", "velocity_ball_to_goal", "ball_velocity_to_own_goal", "ball_goal_distance",
    "goal_mouth_progress", "align_ball_goal", "face_ball", "in_air", "save_boost", "collect_boost", "turtled",
    "recovery",
)  # fmt: skip
"""Every reward component's name (:data:`speedflip.env.rewards.REWARD_COMPONENTS` checks it holds these)."""

SETTER_OPTIONS: dict[str, dict[str, OptionValue]] = {
    "kickoff": {},
    "random": {"ball_max_speed": 2000.0, "car_max_speed": 1500.0, "air_fraction": 0.2, "cars_on_ground": False},
    "random_ground": {"ball_max_speed": 2000.0, "car_max_speed": 1500.0},
    "turtled": {"ball_max_speed": 500.0},
    "wall": {"max_speed": 1200.0, "ball_max_distance": 1000.0},
    "air_dribble": {"min_height": 300.0, "max_height": 1000.0, "max_speed": 1300.0},
    "flip_reset": {"min_height": 800.0, "max_height": 1600.0},
    "jump_challenge": {"min_height": 300.0, "max_height": 1500.0},
    "defense": {"ball_max_speed": 800.0, "car_max_speed": 1400.0},
    "attack": {"ball_max_speed": 800.0, "car_max_speed": 1400.0, "defender_in_goal_fraction": 0.5},
    "end_line": {"ball_max_speed": 400.0, "car_max_speed": 1400.0, "defender_in_goal_fraction": 0.5},
}
"""Each state setter's options (its keyword-only parameters) with their defaults, by setter name."""

STATE_SETTER_NAMES: tuple[str, ...] = tuple(SETTER_OPTIONS)
"""Every state setter's name, in registry order."""

MECHANICS_SETTERS = ("wall", "air_dribble", "flip_reset", "jump_challenge")
"""The default mix of the mechanics lane (``env.mechanics_setters``), equal weights."""


def setter_options(name: str) -> dict[str, OptionValue]:
    """The options setter ``name`` accepts (its keyword-only parameters) with their defaults."""
    return dict(SETTER_OPTIONS[name])


def check_setter_options(options: Mapping[str, Mapping[str, OptionValue]]) -> None:
    """Raise ``ValueError`` naming the setter and option for anything a setter cannot take.

    Rules: the setter and option exist; a flag (default ``True``/``False``) gets a bool and a number
    gets a number; numbers are >= 0; ``*_fraction`` options are <= 1; ``min_X`` <= ``max_X``.
    """
    for name, given in options.items():
        if name not in SETTER_OPTIONS:
            raise ValueError(f"options for unknown state setter '{name}'; available: {sorted(SETTER_OPTIONS)}")
        known = setter_options(name)
        for key, value in given.items():
            if key not in known:
                allowed = ", ".join(sorted(known)) or "none"
                raise ValueError(f"state setter '{name}' has no option '{key}'; its options: {allowed}")
            if isinstance(known[key], bool) != isinstance(value, bool):
                kind = "true/false" if isinstance(known[key], bool) else "a number"
                raise ValueError(f"state setter option {name}.{key} must be {kind}, got {value!r}")
            if isinstance(value, bool):
                continue
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"state setter option {name}.{key} must be a finite number >= 0, got {value!r}")
            if key.endswith("_fraction") and value > 1:
                raise ValueError(f"state setter option {name}.{key} is a fraction (0..1), got {value!r}")
        merged = {**known, **given}
        for key, value in merged.items():
            other = "max_" + key.removeprefix("min_")
            if key.startswith("min_") and other in merged and float(value) > float(merged[other]):
                raise ValueError(
                    f"state setter '{name}': {key} ({float(value):g}) is above {other} ({float(merged[other]):g})"
                )
