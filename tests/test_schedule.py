"""schedule.py: (config, agent steps, metrics) -> settings, answers computed by hand."""

from __future__ import annotations

import pytest

from speedflip.config import ConfigError, build_config
from speedflip.schedule import (
    adapt_learning_rate,
    ent_coef,
    fade_progress,
    kickstart_coef,
    learning_rate,
    mechanics_active,
    next_reward_phase,
    next_stage,
    run_progress,
    stage_config,
    stage_opponent_share,
)


def test_learning_rate_constant_or_annealed() -> None:
    cfg = build_config({"ppo": {"learning_rate": 0.001}, "run": {"total_steps": 1000}})
    assert learning_rate(cfg, 500) == 0.001
    annealed = build_config({"ppo": {"learning_rate": 0.001, "anneal_lr": True}, "run": {"total_steps": 1000}})
    assert learning_rate(annealed, 0) == pytest.approx(0.001)
    assert learning_rate(annealed, 250) == pytest.approx(0.00075)
    assert learning_rate(annealed, 2000) == 0.0


def test_learning_rate_held_then_annealed() -> None:
    """ppo.anneal_lr_start 0.6: 0.001 until 60 % of the run, then linear to 0: at 80 % half of it, 0.0005; at 90 %
    a quarter, 0.00025. The same by the time budget: 540 s of 600 is 90 %."""
    cfg = build_config(
        {"ppo": {"learning_rate": 0.001, "anneal_lr": True, "anneal_lr_start": 0.6}, "run": {"total_steps": 1000}}
    )
    assert learning_rate(cfg, 0) == pytest.approx(0.001)
    assert learning_rate(cfg, 600) == pytest.approx(0.001)
    assert learning_rate(cfg, 800) == pytest.approx(0.0005)
    assert learning_rate(cfg, 900) == pytest.approx(0.00025)
    assert learning_rate(cfg, 1000) == 0.0
    timed = build_config(
        {
            "ppo": {"learning_rate": 0.001, "anneal_lr": True, "anneal_lr_start": 0.6},
            "run": {"total_steps": 10**9, "time_budget_minutes": 10},
        }
    )
    assert learning_rate(timed, 10, train_seconds=540.0) == pytest.approx(0.00025)
    with pytest.raises(ConfigError, match="anneal_lr_start"):
        build_config({"ppo": {"anneal_lr": True, "anneal_lr_start": 1.0}})
    with pytest.raises(ConfigError, match=r"anneal_lr_start \(0.5\) only shapes ppo.anneal_lr, which is off"):
        build_config({"ppo": {"anneal_lr": False, "anneal_lr_start": 0.5}})


def test_time_budget_ends_the_schedules_when_it_comes_first() -> None:
    """run.time_budget_minutes: the run's progress is the larger of its step share and its time share."""
    cfg = build_config(
        {"ppo": {"learning_rate": 0.001, "anneal_lr": True}, "run": {"total_steps": 1000, "time_budget_minutes": 10}}
    )
    assert run_progress(cfg, 250, 300.0) == pytest.approx(0.5)  # 300 s of 600: half the time, a quarter the steps
    assert run_progress(cfg, 800, 60.0) == pytest.approx(0.8)  # the steps lead
    assert run_progress(cfg, 0, 1200.0) == 1.0  # past the budget: clipped
    assert learning_rate(cfg, 250, train_seconds=300.0) == pytest.approx(0.0005)
    assert learning_rate(cfg, 800, train_seconds=60.0) == pytest.approx(0.0002)
    assert learning_rate(cfg, 0, train_seconds=600.0) == 0.0
    steps_only = build_config({"ppo": {"learning_rate": 0.001, "anneal_lr": True}, "run": {"total_steps": 1000}})
    assert learning_rate(steps_only, 250, train_seconds=10**6) == pytest.approx(0.00075)  # no budget: time ignored
    entropy = build_config(
        {"ppo": {"ent_coef": 0.01, "ent_coef_final": 0.0}, "run": {"total_steps": 1000, "time_budget_minutes": 10}}
    )
    assert ent_coef(entropy, 100, 450.0) == pytest.approx(0.0025)  # 0.01 * (1 - 0.75)
    decay = {"ent_coef": 0.01, "ent_coef_final": 0.0, "ent_coef_decay_steps": 400}
    fixed_steps = build_config({"ppo": decay, "run": {"time_budget_minutes": 10}})
    assert ent_coef(fixed_steps, 100, 599.0) == pytest.approx(0.0075)  # its own steps decide, not the clock


def test_time_budget_must_be_positive() -> None:
    for bad in (0, -5):
        with pytest.raises(ConfigError, match="time_budget_minutes"):
            build_config({"run": {"time_budget_minutes": bad}})


def test_learning_rate_adapted_to_kl() -> None:
    cfg = build_config({"ppo": {"learning_rate": 0.001, "lr_target_kl": 0.01, "learning_rate_max": 0.002}})
    ppo = cfg.ppo
    assert learning_rate(cfg, 0) == 0.001  # before the first update: ppo.learning_rate
    assert learning_rate(cfg, 10**6, adapted=0.0004) == 0.0004  # then what the last update left
    assert adapt_learning_rate(ppo, 0.001, 0.001) == pytest.approx(0.0015)  # KL < 0.005: x1.5
    assert adapt_learning_rate(ppo, 0.0015, 0.001) == pytest.approx(0.002)  # x1.5 = 0.00225, capped at max
    assert adapt_learning_rate(ppo, 0.001, 0.03) == pytest.approx(0.001 / 1.5)  # KL > 0.02: /1.5
    assert adapt_learning_rate(ppo, 0.001, 0.005) == 0.001  # 0.005..0.02: unchanged
    assert adapt_learning_rate(ppo, 0.001, 0.02) == 0.001
    assert adapt_learning_rate(ppo, 0.001, float("nan")) == 0.001  # no minibatch applied
    assert adapt_learning_rate(ppo, 1.2e-5, 1.0) == pytest.approx(1e-5)  # floor: learning_rate_min
    fixed = build_config({"ppo": {"learning_rate": 0.001}})
    assert adapt_learning_rate(fixed.ppo, 0.001, 1e-9) == 0.001  # lr_target_kl unset: never adapted
    assert learning_rate(fixed, 0, adapted=0.5) == 0.001


def test_learning_rate_schedules_exclusive() -> None:
    with pytest.raises(ConfigError, match=r"anneal_lr and ppo\.lr_target_kl"):
        build_config({"ppo": {"anneal_lr": True, "lr_target_kl": 0.01}})
    with pytest.raises(ConfigError, match=r"learning_rate_min \(0\.01\) is above"):
        build_config({"ppo": {"learning_rate_min": 0.01, "learning_rate_max": 0.001}})


def test_entropy_constant_or_decayed() -> None:
    assert ent_coef(build_config({"ppo": {"ent_coef": 0.01}}), 10**9) == 0.01
    cfg = build_config({"ppo": {"ent_coef": 0.01, "ent_coef_final": 0.002, "ent_coef_decay_steps": 400}})
    assert ent_coef(cfg, 0) == pytest.approx(0.01)
    assert ent_coef(cfg, 100) == pytest.approx(0.008)  # 0.01 - 0.008 * 100/400
    assert ent_coef(cfg, 400) == pytest.approx(0.002)
    assert ent_coef(cfg, 10_000) == pytest.approx(0.002)
    over_budget = build_config({"ppo": {"ent_coef": 0.01, "ent_coef_final": 0.0}, "run": {"total_steps": 1000}})
    assert ent_coef(over_budget, 500) == pytest.approx(0.005)


def test_negative_final_entropy_coefficient_crosses_zero_then_prices_entropy() -> None:
    # 0.01 -> -0.02 over 1,500 steps: the line crosses 0 at 0.01 / 0.03 of it = 500 steps
    cfg = build_config({"ppo": {"ent_coef": 0.01, "ent_coef_final": -0.02, "ent_coef_decay_steps": 1_500}})
    assert ent_coef(cfg, 0) == pytest.approx(0.01)
    assert ent_coef(cfg, 500) == pytest.approx(0.0, abs=1e-12)
    assert ent_coef(cfg, 1_000) == pytest.approx(-0.01)  # 0.01 - 0.03 * 1000/1500
    assert ent_coef(cfg, 9_000) == pytest.approx(-0.02)
    with pytest.raises(ConfigError, match="ent_coef_final"):
        build_config({"ppo": {"ent_coef_final": -2.0}})


def test_kickstart_weight_decays_linearly_to_zero() -> None:
    assert kickstart_coef(build_config({}), 0) == 0.0  # off by default
    assert kickstart_coef(build_config({"ppo": {"kickstart_coef": 0.7}}), 10**9) == 0.7  # no kickstart_steps: constant
    cfg = build_config({"ppo": {"kickstart_coef": 2.0, "kickstart_steps": 400}})
    assert kickstart_coef(cfg, 0) == pytest.approx(2.0)
    assert kickstart_coef(cfg, 100) == pytest.approx(1.5)  # 2 * (1 - 100/400)
    assert kickstart_coef(cfg, 400) == 0.0
    assert kickstart_coef(cfg, 10_000) == 0.0


def test_kickstart_ends_by_the_clock_on_a_slow_machine() -> None:
    # 0.5 at most 5,000 steps or 40 % of a 10-minute budget (240 s), whichever comes first
    ppo = {"kickstart_coef": 0.5, "kickstart_steps": 5_000, "kickstart_fraction": 0.4}
    cfg = build_config({"ppo": ppo, "run": {"total_steps": 10**9, "time_budget_minutes": 10}})
    assert kickstart_coef(cfg, 0, 0.0) == pytest.approx(0.5)
    # slow: 1,000 steps (a fifth of 5,000) after 120 s (half of 240 s): the clock is further on
    assert kickstart_coef(cfg, 1_000, 120.0) == pytest.approx(0.25)  # 0.5 * (1 - 120/240)
    assert kickstart_coef(cfg, 2_000, 240.0) == 0.0
    assert kickstart_coef(cfg, 2_000, 599.0) == 0.0
    # fast: 4,000 steps after 60 s: the steps are further on (0.8 against 0.25)
    assert kickstart_coef(cfg, 4_000, 60.0) == pytest.approx(0.1)  # 0.5 * (1 - 4000/5000)
    # the fraction alone: 40 % of run.total_steps without a time budget
    alone = build_config({"ppo": {"kickstart_coef": 1.0, "kickstart_fraction": 0.4}, "run": {"total_steps": 1_000}})
    assert kickstart_coef(alone, 100) == pytest.approx(0.75)  # 1 - (100/1000)/0.4
    assert kickstart_coef(alone, 400) == 0.0


def test_entropy_decay_ends_by_the_clock_on_a_slow_machine() -> None:
    ppo = {"ent_coef": 0.01, "ent_coef_final": 0.0, "ent_coef_decay_steps": 5_000, "ent_coef_decay_fraction": 0.5}
    cfg = build_config({"ppo": ppo, "run": {"total_steps": 10**9, "time_budget_minutes": 10}})
    assert ent_coef(cfg, 1_000, 150.0) == pytest.approx(0.005)  # 150 s of the 300 s: half, where steps say a fifth
    assert ent_coef(cfg, 2_500, 30.0) == pytest.approx(0.005)  # half of the steps, a tenth of the time
    assert ent_coef(cfg, 1_000, 300.0) == 0.0
    assert ent_coef(cfg, 1_000, 590.0) == 0.0  # then constant at ent_coef_final


def test_fade_progress_is_none_without_an_end() -> None:
    cfg = build_config({})
    assert fade_progress(cfg, 100, 5.0, None, None) is None
    assert fade_progress(cfg, 100, 0.0, 400, None) == pytest.approx(0.25)
    assert fade_progress(cfg, 800, 0.0, 400, None) == 1.0


@pytest.mark.parametrize("field", ["kickstart_fraction", "ent_coef_decay_fraction"])
@pytest.mark.parametrize("value", [0.0, -0.1, 1.5])
def test_fractions_of_the_run_outside_0_1_are_refused(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=field):
        build_config({"ppo": {field: value}})


PHASES = [
    {"name": "touch", "rewards": {"touch": 1.0}, "until_steps": 100},
    {"name": "shoot", "rewards": {"goal": 1.0}, "until_metric": "charts/touches_per_minute", "until_value": 5.0},
    {"name": "play", "rewards": {"goal": 1.0}},
]


def test_reward_phases_advance_by_steps_then_by_metric() -> None:
    env = build_config({"env": {"reward_phases": PHASES, "mechanics_from_phase": 2}}).env
    assert next_reward_phase(env, 0, 99, {}) is None
    change = next_reward_phase(env, 0, 100, {})
    assert change is not None and change.index == 1 and "'touch' -> 'shoot'" in change.message
    assert next_reward_phase(env, 1, 10**6, {"charts/touches_per_minute": 4.9}) is None
    change = next_reward_phase(env, 1, 0, {"charts/touches_per_minute": 5.0})
    assert change is not None and change.index == 2
    assert next_reward_phase(env, 2, 10**9, {"charts/touches_per_minute": 99.0}) is None  # the last phase
    assert [mechanics_active(env, p) for p in range(3)] == [False, False, True]


def test_curriculum_stages() -> None:
    cfg = build_config({"curriculum": {"enabled": True}})
    stages = cfg.curriculum.stages
    assert stage_config(cfg, 0).env.blue_size == stages[0].blue_size
    largest = max(max(s.blue_size, s.orange_size) for s in stages)
    assert stage_config(cfg, 0).env.obs_team_size == max(cfg.env.obs_team_size, largest)  # padded to the largest
    assert stage_opponent_share(cfg, 1) == stages[1].opponent_share
    until = stages[0].until_steps
    assert until is not None
    assert next_stage(cfg, 0, until - 1, None, 1000.0) is None
    change = next_stage(cfg, 0, until, None, 1000.0)
    assert change is not None and change.index == 1 and f"step {until:,}" in change.message
    assert next_stage(cfg, len(stages) - 1, 10**12, 1.0, 9999.0) is None  # the last stage stays
    plain = build_config({})
    assert stage_config(plain, 0) is plain and next_stage(plain, 0, 10**12, 1.0, 9999.0) is None
