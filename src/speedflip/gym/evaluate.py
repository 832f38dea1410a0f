"""Evaluating a policy on a Gymnasium env: episodes, summary statistics, success and a verdict.

Used during training (periodic evaluation on separate env copies, best checkpoint) and by
``speedflip eval RUN`` with one argument.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from speedflip.checkpoint import CheckpointError, list_checkpoints, load_checkpoint, verify_checkpoint
from speedflip.config import Config, GymConfig, build_config
from speedflip.gym.agents import GymPolicy, policy_from_checkpoint
from speedflip.gym.envs import SpaceInfo, encode_obs, make_gym_vec_env, max_episode_steps, reward_threshold, space_info
from speedflip.jsonsafe import dumps

UNLIMITED_EPISODE_CAP = 100_000
"""Steps after which an episode of an env without a time limit is cut (counted as truncated)."""


@dataclass
class Episodes:
    """Per-episode outcomes, in env order."""

    returns: list[float]
    lengths: list[int]
    terminated: list[bool]
    truncated: list[bool]


def run_episodes(
    env_id: str,
    env_kwargs: dict[str, Any],
    policy: GymPolicy,
    episodes: int,
    num_envs: int,
    seed: int,
    deterministic: bool,
) -> Episodes:
    """Play exactly ``episodes`` episodes with ``policy`` on fresh copies of ``env_id``.

    Episodes are split evenly over ``min(num_envs, episodes)`` copies seeded from ``seed``, so that
    short episodes are not over-represented (each copy plays its quota, later ones are discarded).
    """
    n = max(1, min(num_envs, episodes))
    env = make_gym_vec_env(env_id, n, env_kwargs)
    try:
        info = space_info(env.single_observation_space, env.single_action_space, env_id, "eval")
        quota = np.array([episodes // n + (i < episodes % n) for i in range(n)])
        done_count = np.zeros(n, np.int64)
        ret = np.zeros(n, np.float64)
        length = np.zeros(n, np.int64)
        cap = max(UNLIMITED_EPISODE_CAP, 2 * (max_episode_steps(env_id) or 0))
        out = Episodes([], [], [], [])
        raw, _ = env.reset(seed=seed)
        starts = np.ones(n, bool)
        policy.reset(n)
        while (done_count < quota).any():
            actions = policy.act(encode_obs(raw, info), starts, deterministic)
            raw, rewards, terminated, truncated, _ = env.step(actions)
            ret += rewards
            length += 1
            cut = length >= cap  # a runaway episode of an env without a time limit
            done = terminated | truncated | cut
            for i in np.flatnonzero(done):
                if done_count[i] < quota[i]:
                    out.returns.append(float(ret[i]))
                    out.lengths.append(int(length[i]))
                    out.terminated.append(bool(terminated[i]))
                    out.truncated.append(bool(truncated[i] or cut[i]) and not bool(terminated[i]))
                    done_count[i] += 1
            ret[done] = 0.0
            length[done] = 0
            starts = done
        return out
    finally:
        env.close()


@dataclass
class EvalSummary:
    """What ``speedflip eval RUN`` reports (and writes with ``--json``)."""

    env_id: str
    episodes: int
    deterministic: bool
    mean_return: float
    std_return: float
    min_return: float
    max_return: float
    mean_length: float
    std_length: float
    min_length: int
    max_length: int
    success_rate: float | None
    success_definition: str
    solved_return: float | None
    solved: bool | None
    verdict: str
    returns: list[float]
    lengths: list[int]


def success_rule(gym_cfg: GymConfig, env_id: str) -> tuple[str, float | None]:
    """``(mode, threshold)`` after resolving ``auto``; mode is ``none`` when nothing defines success."""
    threshold = gym_cfg.success_return if gym_cfg.success_return is not None else solved_threshold(gym_cfg, env_id)
    if gym_cfg.success == "auto":
        return ("return", threshold) if threshold is not None else ("none", None)
    if gym_cfg.success == "return" and threshold is None:
        return "none", None
    return gym_cfg.success, threshold


def solved_threshold(gym_cfg: GymConfig, env_id: str) -> float | None:
    """``gym.solved_return``, else the env's registered ``reward_threshold``."""
    return gym_cfg.solved_return if gym_cfg.solved_return is not None else reward_threshold(env_id)


def verdict(mean: float, solved: float | None, random_return: float | None, env_id: str) -> str:
    """A plain-words judgement of a mean return against the preset's thresholds."""
    if solved is None:
        return f"no solved threshold is known for {env_id} (set gym.solved_return); mean return {mean:.1f}"
    if mean >= solved:
        return f"solved: mean return {mean:.1f} reaches the threshold {solved:g}"
    if random_return is not None and solved != random_return:
        progress = (mean - random_return) / (solved - random_return)
        if progress <= 0.1:
            return (
                f"not learned: mean return {mean:.1f} is about what a random policy gets ({random_return:g}); "
                f"solved means {solved:g}"
            )
        return (
            f"learning, not solved: mean return {mean:.1f} is {progress:.0%} of the way from a random "
            f"policy ({random_return:g}) to solved ({solved:g})"
        )
    return f"not solved: mean return {mean:.1f} is below the threshold {solved:g}"


def summarize(episodes: Episodes, gym_cfg: GymConfig, env_id: str, deterministic: bool) -> EvalSummary:
    """Statistics, success rate and verdict of a set of episodes."""
    returns = np.asarray(episodes.returns, np.float64)
    lengths = np.asarray(episodes.lengths, np.int64)
    mode, threshold = success_rule(gym_cfg, env_id)
    if mode == "truncated":
        success: list[bool] | None = episodes.truncated
        definition = "reached the time limit without failing (truncated, not terminated)"
    elif mode == "terminated":
        success = episodes.terminated
        definition = "reached a terminal (goal) state before the time limit"
    elif mode == "return":
        success = [r >= (threshold or 0.0) for r in episodes.returns]
        definition = f"episode return >= {threshold:g}"
    else:
        success, definition = None, "undefined (set gym.success / gym.success_return)"
    solved = solved_threshold(gym_cfg, env_id)
    mean = float(returns.mean())
    return EvalSummary(
        env_id=env_id,
        episodes=len(returns),
        deterministic=deterministic,
        mean_return=mean,
        std_return=float(returns.std()),
        min_return=float(returns.min()),
        max_return=float(returns.max()),
        mean_length=float(lengths.mean()),
        std_length=float(lengths.std()),
        min_length=int(lengths.min()),
        max_length=int(lengths.max()),
        success_rate=None if success is None else float(np.mean(success)),
        success_definition=definition,
        solved_return=solved,
        solved=None if solved is None else mean >= solved,
        verdict=verdict(mean, solved, gym_cfg.random_return, env_id),
        returns=[float(r) for r in returns],
        lengths=[int(v) for v in lengths],
    )


# ---------------------------------------------------------------------- `speedflip eval RUN`
def find_checkpoint(spec: str) -> tuple[Path, str]:
    """A run dir (its ``checkpoints/best``, else newest good checkpoint) or a checkpoint folder; with why."""
    path = Path(spec)
    if (path / "meta.json").is_file():
        verify_checkpoint(path)
        return path, "the checkpoint given"
    ckpts = path / "checkpoints"
    if not ckpts.is_dir():
        raise CheckpointError(f"'{spec}' is neither a run directory (no checkpoints/ inside) nor a checkpoint folder")
    best = ckpts / "best"
    skipped = []
    if best.is_dir():
        try:
            meta = verify_checkpoint(best)
            score = meta.get("eval", {}).get("mean_return")
            shown = "-" if score is None else f"{score:.1f}"
            return best, f"best periodic evaluation (step {meta.get('global_step')}, mean return {shown})"
        except CheckpointError as err:
            skipped.append(str(err))
    for candidate in list_checkpoints(ckpts):
        try:
            verify_checkpoint(candidate)
        except CheckpointError as err:
            skipped.append(str(err))
            continue
        return candidate, "newest checkpoint" + (f" (skipped: {' | '.join(skipped)})" if skipped else "")
    raise CheckpointError(f"'{spec}' has no usable checkpoint" + (f": {' | '.join(skipped)}" if skipped else ""))


def checkpoint_config(path: Path) -> Config | None:
    """The config a checkpoint was trained with, or ``None`` for a checkpoint of another kind (no config)."""
    meta = verify_checkpoint(path)
    data = meta.get("config")
    if not isinstance(data, dict):
        return None
    return build_config(data, f"the config saved in {path}/meta.json")


def is_gym_checkpoint(path: Path) -> bool:
    """Whether the checkpoint's saved config names a Gymnasium env (read without validating it)."""
    config = verify_checkpoint(path).get("config")
    gym_section = config.get("gym") if isinstance(config, dict) else None
    return isinstance(gym_section, dict) and gym_section.get("env_id") is not None


def evaluate_checkpoint(
    path: Path, episodes: int, deterministic: bool, seed: int, num_envs: int = 8
) -> tuple[EvalSummary, Config]:
    """Load a gym checkpoint and play ``episodes`` episodes with it."""
    cfg = checkpoint_config(path)
    if cfg is None or cfg.gym.env_id is None:
        raise CheckpointError(f"{path} is not a checkpoint of a Gymnasium run")
    env_id = cfg.gym.env_id
    probe = make_gym_vec_env(env_id, 1, cfg.gym.env_kwargs)
    try:
        info: SpaceInfo = space_info(probe.single_observation_space, probe.single_action_space, env_id, cfg.algo)
    finally:
        probe.close()
    policy = policy_from_checkpoint(cfg, info, load_checkpoint(path), torch.device("cpu"))
    result = run_episodes(env_id, cfg.gym.env_kwargs, policy, episodes, num_envs, seed, deterministic)
    return summarize(result, cfg.gym, env_id, deterministic), cfg


def print_summary(console: Console, summary: EvalSummary, source: str) -> None:
    table = Table(title=f"{summary.env_id}: {summary.episodes} episodes", show_header=False, title_justify="left")
    mode = "deterministic (most likely action)" if summary.deterministic else "stochastic (sampled actions)"

    def ms(mean: float, std: float) -> str:
        return f"{mean:.2f} ± {std:.2f}"

    rows = [
        ("checkpoint", source),
        ("actions", mode),
        ("return", f"{ms(summary.mean_return, summary.std_return)}  (min {summary.min_return:g}, "
                   f"max {summary.max_return:g})"),
        ("episode length", f"{ms(summary.mean_length, summary.std_length)}  (min {summary.min_length}, "
                           f"max {summary.max_length})"),
        ("success rate", "-" if summary.success_rate is None else f"{summary.success_rate:.0%}"),
        ("success means", summary.success_definition),
        ("verdict", summary.verdict),
    ]  # fmt: skip
    for key, value in rows:
        table.add_row(key, escape(value))
    console.print(table)


def run_gym_eval(spec: str, episodes: int, stochastic: bool, seed: int, json_path: str | None, console: Console) -> int:
    """``speedflip eval RUN --episodes N [--stochastic] [--json PATH]`` for a Gymnasium run."""
    path, why = find_checkpoint(spec)
    summary, _ = evaluate_checkpoint(path, episodes, not stochastic, seed)
    print_summary(console, summary, f"{path} ({why})")
    if json_path:
        record = {**asdict(summary), "checkpoint": str(path)}
        out = Path(json_path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dumps(record, indent=2))
        console.print(f"summary written to {out}")
    return 0
