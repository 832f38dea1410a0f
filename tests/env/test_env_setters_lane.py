"""Setter options, the mechanics lane (which arenas, when active, both collectors alike) and their config."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from speedflip.collect.multiprocess import MultiProcessVecEnv
from speedflip.config import ConfigError, EnvConfig, build_config
from speedflip.env import layout as L
from speedflip.env.arenas import Arenas
from speedflip.env.episodes import EPISODE_METRICS
from speedflip.env.states import (
    MECHANICS_SETTERS,
    check_setter_options,
    make_setter,
    mechanics_lane,
    setter_options,
)
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.train.trainer import RolloutStats, Trainer, summarize_iteration

PHASES = [
    {"name": "touch", "rewards": {"touch": 1.0}, "until_steps": 10},
    {"name": "skills", "rewards": {"touch": 1.0, "goal": 1.0}},
]


# ---------------------------------------------------------------------- which arenas
@pytest.mark.parametrize(
    ("share", "num_arenas", "lane"),
    [
        (0.0, 4, []),
        (1.0, 3, [0, 1, 2]),
        (0.25, 8, [3, 7]),  # floor((g+1)/4) > floor(g/4) at g = 3, 7
        (0.5, 5, [1, 3]),  # floor(5 * 0.5) = 2 arenas
        (0.1, 10, [9]),  # 10 * 0.1 is 1 despite floating point
        (0.3, 10, [3, 6, 9]),  # floor(1.2), floor(2.1), floor(3.0)
    ],
)
def test_mechanics_lane_arenas(share: float, num_arenas: int, lane: list[int]) -> None:
    assert np.flatnonzero(mechanics_lane(share, 0, num_arenas)).tolist() == lane


def test_mechanics_lane_of_slices_is_the_lane_of_the_pool() -> None:
    """A worker owning arenas [a, b) computes from its offset alone what the whole pool would."""
    whole = mechanics_lane(0.37, 0, 23)
    parts = [mechanics_lane(0.37, a, b - a) for a, b in ((0, 7), (7, 8), (8, 23))]
    np.testing.assert_array_equal(np.concatenate(parts), whole)
    assert whole.sum() == 8  # floor(23 * 0.37) = floor(8.51)


# ---------------------------------------------------------------------- options
def test_setter_options_are_the_keyword_parameters() -> None:
    assert setter_options("random") == {
        "ball_max_speed": 2000.0,
        "car_max_speed": 1500.0,
        "air_fraction": 0.2,
        "cars_on_ground": False,
    }
    assert setter_options("kickoff") == {}
    assert set(setter_options("jump_challenge")) == {"min_height", "max_height"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"nope": {}}, "unknown state setter 'nope'"),
        ({"random": {"speed": 1.0}}, "state setter 'random' has no option 'speed'; its options: air_fraction"),
        ({"random": {"cars_on_ground": 1.0}}, "random.cars_on_ground must be true/false"),
        ({"wall": {"max_speed": True}}, "wall.max_speed must be a number"),
        ({"wall": {"max_speed": -1.0}}, "wall.max_speed must be a finite number >= 0"),
        ({"random": {"air_fraction": 1.5}}, r"random.air_fraction is a fraction \(0..1\)"),
        ({"jump_challenge": {"min_height": 1600.0}}, r"min_height \(1600\) is above max_height \(1500\)"),
    ],
)
def test_bad_setter_options_are_named(options: dict[str, dict[str, Any]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_setter_options(options)


def test_options_reach_the_setter() -> None:
    """random with cars_on_ground=true and a still ball: every car on the floor, the ball not moving."""
    arenas = Arenas(num_arenas=1, blue_size=2, orange_size=2)
    setter = make_setter("random", {"cars_on_ground": True, "ball_max_speed": 0.0, "air_fraction": 1.0})
    rng = np.random.default_rng(0)
    try:
        for _ in range(10):
            setter(arenas.arenas[0], arenas.cars[0], rng)
            st = arenas.read_all()
            assert np.all(st.cars[0, :, 0, L.CAR_ON_GROUND] == 1.0)
            np.testing.assert_array_equal(st.ball[0, 0, L.BALL_VEL], 0.0)
    finally:
        arenas.close()


# ---------------------------------------------------------------------- config
def test_config_defaults_and_errors() -> None:
    cfg = EnvConfig()
    assert (cfg.mechanics_share, cfg.mechanics_from_phase, cfg.state_setter_options) == (0.0, 0, {})
    assert cfg.mechanics_setters == dict.fromkeys(MECHANICS_SETTERS, 1.0)
    assert set(MECHANICS_SETTERS) == {"wall", "air_dribble", "flip_reset", "jump_challenge"}
    cases = [
        ({"mechanics_setters": {"wal": 1.0}}, r"key 'env.mechanics_setters'.*unknown state setter\(s\) \['wal'\]"),
        ({"mechanics_setters": {"wall": 0.0}}, "at least one > 0"),
        ({"state_setter_options": {"random": {"x": 1}}}, "key 'env.state_setter_options'.*no option 'x'"),
        ({"mechanics_share": 1.5}, "key 'env.mechanics_share'"),
        (
            {"mechanics_share": 0.5, "mechanics_from_phase": 2, "reward_phases": PHASES},
            "mechanics_from_phase 2 needs at least 3 reward_phases",
        ),
    ]
    for env, message in cases:
        with pytest.raises(ConfigError, match=message):
            build_config({"env": env})
    # with no lane the phase is not checked; with enough phases it is fine
    build_config({"env": {"mechanics_from_phase": 2}})
    build_config({"env": {"mechanics_share": 0.5, "mechanics_from_phase": 1, "reward_phases": PHASES}})


# ---------------------------------------------------------------------- the env
def _lane_env(make_env: Callable[..., RocketLeagueVecEnv], **fields: Any) -> RocketLeagueVecEnv:
    """4 arenas of kickoffs; arenas 1 and 3 are the lane (share 0.5) with jump challenges only."""
    data: dict[str, Any] = {
        "num_arenas": 4,
        "state_setters": {"kickoff": 1.0},
        "mechanics_share": 0.5,
        "mechanics_setters": {"jump_challenge": 1.0},
        "timeout_seconds": 0.5,
    }
    return make_env(**{**data, **fields})


def _high_ball(env: RocketLeagueVecEnv) -> list[bool]:
    return [bool(z > 250.0) for z in env.state.ball[:, 0, L.BALL_POS.start + 2]]


def test_lane_arenas_start_from_the_mechanics_mix(make_env: Callable[..., RocketLeagueVecEnv]) -> None:
    env = _lane_env(make_env)
    env.reset()
    assert _high_ball(env) == [False, True, False, True]
    episodes = []
    for _ in range(8):  # 0.5 s = 7.5 steps: every arena ends once
        episodes += env.step(np.zeros(env.num_agents, np.int64)).episodes
    assert [ep["mechanics"] for ep in episodes] == [0.0, 1.0, 0.0, 1.0]


def test_lane_waits_for_its_phase(make_env: Callable[..., RocketLeagueVecEnv]) -> None:
    env = _lane_env(make_env, mechanics_from_phase=1, reward_phases=PHASES)
    env.reset()
    assert _high_ball(env) == [False] * 4, "inactive until the trainer reaches phase 1"
    env.set_mechanics_active(True)
    env.reset()
    assert _high_ball(env) == [False, True, False, True]
    env.set_mechanics_active(False)
    env.reset()
    assert _high_ball(env) == [False] * 4


def test_lane_keeps_both_collectors_identical() -> None:
    """Short episodes with a lane switched on half way: the multi-process collector (uneven worker
    slices) returns exactly what the in-process env returns, episode metrics included."""
    cfg = EnvConfig(
        num_arenas=5,
        timeout_seconds=1.0,
        no_touch_timeout_seconds=0.5,
        state_setters={"kickoff": 1.0, "random": 1.0, "turtled": 0.5},
        state_setter_options={"flip_reset": {"min_height": 900.0}},
        mechanics_share=0.6,
        mechanics_from_phase=1,
        reward_phases=PHASES,
    )
    inproc = RocketLeagueVecEnv(cfg, seed=4)
    multi = MultiProcessVecEnv(cfg, seed=4, num_workers=2, start_method="forkserver", timeout=30.0)
    try:
        assert np.array_equal(inproc.reset(), multi.reset())
        rng = np.random.default_rng(1)
        mechanics = 0.0
        for t in range(60):
            if t == 20:
                inproc.set_mechanics_active(True)
                multi.set_mechanics_active(True)
            actions = rng.integers(0, inproc.num_actions, inproc.num_agents)
            a, b = inproc.step(actions), multi.step(actions)
            for name in ("obs", "rewards", "terminated", "truncated", "final_obs"):
                assert np.array_equal(getattr(a, name), getattr(b, name)), f"step {t}: {name}"
            assert a.episodes == b.episodes, f"step {t}"
            for episode in a.episodes:
                assert set(EPISODE_METRICS) <= set(episode)
                mechanics += episode["mechanics"]
        assert mechanics >= 3, "lane episodes happened after the switch"
        assert inproc.get_rng_state() == multi.get_rng_state()
    finally:
        inproc.close()
        multi.close()


# ---------------------------------------------------------------------- the trainer
def test_trainer_switches_the_lane_with_the_reward_phase_and_logs_episode_charts() -> None:
    data = {
        "env": {
            "num_arenas": 2,
            "mechanics_share": 1.0,
            "mechanics_from_phase": 1,
            "reward_phases": PHASES,
            "timeout_seconds": 0.5,
        },
        "ppo": {"num_steps": 8, "minibatch_size": 16, "policy_layers": [16], "critic_layers": [16]},
        "run": {"device": "cpu", "collector": "inprocess", "num_threads": 1, "torch_threads": 1, "tensorboard": False},
    }
    trainer = Trainer(build_config(data))
    try:
        env = trainer.env
        assert isinstance(env, RocketLeagueVecEnv)
        assert not env.mechanics_active
        _, _, stats = trainer.collect()  # 8 steps of 0.5 s episodes: each arena finishes once
        assert trainer.advance_reward_phase({}) is not None
        assert env.mechanics_active
        record = summarize_iteration(trainer, stats, {}, 1.0, 1.0)
        for name in EPISODE_METRICS:
            assert f"charts/{name}" in record
        assert record["charts/mechanics"] == 0.0, "those episodes started before the switch"
        assert isinstance(record["charts/mean_speed"], float) and record["charts/mean_speed"] > 0.0
        empty = RolloutStats(collect_seconds=1.0, steps=1, touches_per_minute=0.0, goals_per_minute=0.0)
        assert "charts/touches" not in summarize_iteration(trainer, empty, {}, 1.0, 1.0)
    finally:
        trainer.close()
