"""What changes as training goes: curriculum stages, reward phases, the mechanics lane, learning rate and
entropy. Pure functions of (config, agent steps, metrics) -> settings; the run loop applies them
between rollouts (a new stage rebuilds the collector, a new phase sets reward weights).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from speedflip.config import Config, EnvConfig, PPOConfig


def stage_config(cfg: Config, stage: int) -> Config:
    """The config with the env's team sizes of curriculum stage ``stage`` (obs padded to the largest)."""
    if not cfg.curriculum.enabled:
        return cfg
    stages = cfg.curriculum.stages
    current = stages[stage]
    pad = max([cfg.env.obs_team_size] + [max(s.blue_size, s.orange_size) for s in stages])
    env = cfg.env.model_copy(
        update={"blue_size": current.blue_size, "orange_size": current.orange_size, "obs_team_size": pad}
    )
    return cfg.model_copy(update={"env": env})


def stage_opponent_share(cfg: Config, stage: int) -> float:
    """The share of arenas that play the opponent pool in ``stage``."""
    if cfg.curriculum.enabled:
        return cfg.curriculum.stages[stage].opponent_share
    return cfg.selfplay.opponent_share


def stage_name(cfg: Config, stage: int) -> str:
    return cfg.curriculum.stages[stage].name if cfg.curriculum.enabled else "main"


def run_progress(cfg: Config, global_step: int, train_seconds: float = 0.0) -> float:
    """How far the run is towards its end, 0..1: ``global_step / run.total_steps``, or with
    ``run.time_budget_minutes`` the larger of that and the share of the time budget trained so far
    (``train_seconds``, earlier sessions of a resumed run included): the run ends at whichever comes first."""
    progress = global_step / cfg.run.total_steps
    budget = cfg.run.time_budget_minutes
    if budget is not None:
        progress = max(progress, train_seconds / (budget * 60.0))
    return min(1.0, max(0.0, progress))


def learning_rate(cfg: Config, global_step: int, adapted: float | None = None, train_seconds: float = 0.0) -> float:
    """The learning rate for the next update: ``ppo.learning_rate``, decayed linearly to 0 at the end of the
    run (:func:`run_progress`) with ``ppo.anneal_lr``, from ``ppo.anneal_lr_start`` of the run on (constant
    before it); with ``ppo.lr_target_kl``, ``adapted`` (the rate :func:`adapt_learning_rate` left after the
    last update; ``ppo.learning_rate`` before the first)."""
    if cfg.ppo.lr_target_kl is not None:
        return cfg.ppo.learning_rate if adapted is None else adapted
    if not cfg.ppo.anneal_lr:
        return cfg.ppo.learning_rate
    remaining = 1.0 - run_progress(cfg, global_step, train_seconds)
    return cfg.ppo.learning_rate * min(1.0, remaining / (1.0 - cfg.ppo.anneal_lr_start))


LR_ADAPT_FACTOR = 1.5  # the KL-adaptive learning rate moves by this factor per update (as rsl_rl's PPO)


def adapt_learning_rate(ppo: PPOConfig, current: float, approx_kl: float) -> float:
    """The KL-adaptive learning rate after an update whose mean approximate KL was ``approx_kl``:
    ``current * 1.5`` when the KL was below half of ``ppo.lr_target_kl``, ``current / 1.5`` above twice
    it, else unchanged; kept within ``[ppo.learning_rate_min, ppo.learning_rate_max]``. A NaN KL (no
    minibatch applied) or ``lr_target_kl`` unset leaves ``current`` as it is."""
    target = ppo.lr_target_kl
    if target is None or not math.isfinite(approx_kl):
        return current
    if approx_kl > 2.0 * target:
        current /= LR_ADAPT_FACTOR
    elif approx_kl < 0.5 * target:
        current *= LR_ADAPT_FACTOR
    return min(max(current, ppo.learning_rate_min), ppo.learning_rate_max)


def fade_progress(
    cfg: Config, global_step: int, train_seconds: float, steps: int | None, fraction: float | None
) -> float | None:
    """How far a linear fade has gone, 0..1: it ends at ``steps`` agent steps or at ``fraction`` of the run
    (:func:`run_progress`: the time budget or ``run.total_steps``), whichever comes first, so a slower machine,
    whose minutes buy fewer steps, ends it by the clock. None when neither end is set."""
    ends = []
    if steps is not None:
        ends.append(global_step / steps)
    if fraction is not None:
        ends.append(run_progress(cfg, global_step, train_seconds) / fraction)
    return min(1.0, max(ends)) if ends else None


def ent_coef(cfg: Config, global_step: int, train_seconds: float = 0.0) -> float:
    """The entropy bonus for the next update: ``ppo.ent_coef``, or with ``ppo.ent_coef_final`` set, a linear
    decay from ``ent_coef`` to it ending at ``ppo.ent_coef_decay_steps`` agent steps or at
    ``ppo.ent_coef_decay_fraction`` of the run, whichever comes first (:func:`fade_progress`), then constant;
    with neither, over the whole run (:func:`run_progress`). A negative ``ent_coef_final`` makes the line cross
    0 (at ``ent_coef / (ent_coef - ent_coef_final)`` of the decay) and then price entropy."""
    ppo = cfg.ppo
    if ppo.ent_coef_final is None:
        return ppo.ent_coef
    frac = fade_progress(cfg, global_step, train_seconds, ppo.ent_coef_decay_steps, ppo.ent_coef_decay_fraction)
    if frac is None:
        frac = run_progress(cfg, global_step, train_seconds)
    return ppo.ent_coef + (ppo.ent_coef_final - ppo.ent_coef) * frac


def kickstart_coef(cfg: Config, global_step: int, train_seconds: float = 0.0) -> float:
    """The weight of the rule-bot cross-entropy in the next update: ``ppo.kickstart_coef``, constant, or
    decaying linearly to 0 at ``ppo.kickstart_steps`` agent steps or at ``ppo.kickstart_fraction`` of the run,
    whichever comes first (:func:`fade_progress`), and 0 after (0 when off)."""
    ppo = cfg.ppo
    frac = fade_progress(cfg, global_step, train_seconds, ppo.kickstart_steps, ppo.kickstart_fraction)
    if frac is None:
        return ppo.kickstart_coef
    return ppo.kickstart_coef * (1.0 - frac)


def reward_phase_name(env: EnvConfig, phase: int) -> str:
    return env.reward_phases[phase].name if env.reward_phases else "rewards"


def mechanics_active(env: EnvConfig, phase: int) -> bool:
    """The mechanics lane plays once the reward phase reaches ``env.mechanics_from_phase``."""
    return phase >= env.mechanics_from_phase


@dataclass(frozen=True)
class Change:
    """A move to the next reward phase or curriculum stage, and why (for the console)."""

    index: int  # the new phase or stage
    message: str


def next_reward_phase(env: EnvConfig, phase: int, global_step: int, record: Mapping[str, Any]) -> Change | None:
    """The next reward phase once the current one's step or metric threshold is reached, else None."""
    phases = env.reward_phases
    if phase >= len(phases) - 1:
        return None
    current = phases[phase]
    reason = None
    if current.until_steps is not None and global_step >= current.until_steps:
        reason = f"step {global_step:,} >= {current.until_steps:,}"
    value = record.get(current.until_metric) if current.until_metric else None
    threshold = current.until_value
    if reason is None and isinstance(value, (int, float)) and threshold is not None and value >= threshold:
        reason = f"{current.until_metric} {value:.3g} >= {threshold:g}"
    if reason is None:
        return None
    return Change(phase + 1, f"reward phase: '{current.name}' -> '{phases[phase + 1].name}' ({reason})")


def next_stage(cfg: Config, stage: int, global_step: int, win_rate: float | None, elo: float) -> Change | None:
    """The next curriculum stage once the current one's step, win-rate or Elo condition holds, else None."""
    if not cfg.curriculum.enabled or stage >= len(cfg.curriculum.stages) - 1:
        return None
    current = cfg.curriculum.stages[stage]
    reasons = []
    if current.until_steps is not None and global_step >= current.until_steps:
        reasons.append(f"step {global_step:,} >= {current.until_steps:,}")
    if current.until_win_rate is not None and win_rate is not None and win_rate >= current.until_win_rate:
        reasons.append(f"win rate vs pool {win_rate:.2f} >= {current.until_win_rate}")
    if current.until_elo is not None and elo >= current.until_elo:
        reasons.append(f"Elo {elo:.0f} >= {current.until_elo:g}")
    if not reasons:
        return None
    message = f"curriculum: stage '{current.name}' -> '{stage_name(cfg, stage + 1)}' ({'; '.join(reasons)})"
    return Change(stage + 1, message)
