"""Learning benchmark: speedflip PPO/DQN vs Stable-Baselines3 PPO/DQN on CartPole-v1 or Acrobot-v1 (not in CI).

For every (algorithm, seed) the agent trains for the same budget of env steps; every
``--eval-every`` steps its deterministic policy plays ``--eval-episodes`` episodes on separate env
copies (the same :func:`speedflip.gym.evaluate.run_episodes` for both libraries, same seeds). We
record the first step at which the mean evaluation return reaches the solved threshold (CartPole:
475, Acrobot: -100), the training wall-clock at that point (evaluation time excluded), and the final
evaluation return at the end of the budget. Both libraries run with one torch thread.

Algorithms (``--env`` picks the task; presets and RL-Zoo settings are per task, see ``TASKS``):
  sf-ppo, sf-dqn        speedflip with the presets <task>-ppo / <task>-dqn
  sb3-ppo, sb3-dqn      SB3 with the RL-Zoo hyperparameters for the task (the ones the presets start from)
  sb3-ppo-default       SB3 PPO at its library defaults (n_steps 2048, lr 3e-4, 1 env)
  sb3-dqn-default       SB3 DQN at its library defaults (a 1M buffer, target update every 10k steps)

Usage (needs ``pip install -e .[bench]`` for stable-baselines3)::

    python benchmarks/learning.py --seeds 5 --json learning.json --markdown learning.md
    python benchmarks/learning.py --env Acrobot-v1 --seeds 5 --json acrobot.json --markdown acrobot.md
    python benchmarks/learning.py --algos sf-ppo,sb3-ppo --seeds 3 --stop-when-solved
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from speedflip._types import Array
from speedflip.config import apply_overrides, build_config, load_preset
from speedflip.gym.evaluate import run_episodes
from speedflip.gym.run import GymSession

EVAL_SEED = 12_345


@dataclass(frozen=True)
class Task:
    """A benchmark task: the env, its solved threshold, speedflip's presets and the default budgets."""

    env_id: str
    solved: float
    presets: dict[str, str]
    budgets: dict[str, int]


TASKS = {
    "CartPole-v1": Task("CartPole-v1", 475.0, {"ppo": "cartpole-ppo", "dqn": "cartpole-dqn"},
                        {"ppo": 100_000, "dqn": 60_000}),
    "Acrobot-v1": Task("Acrobot-v1", -100.0, {"ppo": "acrobot-ppo", "dqn": "acrobot-dqn"},
                       {"ppo": 200_000, "dqn": 100_000}),
}  # fmt: skip
TASK = TASKS["CartPole-v1"]  # set by main() from --env


@dataclass
class RunResult:
    algo: str
    seed: int
    budget: int
    solved_step: int | None = None
    solved_seconds: float | None = None
    final_return: float | None = None
    train_seconds: float = 0.0
    curve: list[tuple[int, float]] = field(default_factory=list)


class Evaluator:
    """Evaluates at every ``every`` steps; keeps the curve and the first solved point; times itself."""

    def __init__(self, result: RunResult, every: int, episodes: int, stop_when_solved: bool) -> None:
        self.result, self.every, self.episodes, self.stop = result, every, episodes, stop_when_solved
        self.next_eval = every
        self.eval_seconds = 0.0
        self.start = time.perf_counter()

    def train_seconds(self) -> float:
        return time.perf_counter() - self.start - self.eval_seconds

    def maybe_eval(self, step: int, policy: Any) -> bool:
        """Evaluate if due; returns True when training should stop (solved and --stop-when-solved)."""
        if step < self.next_eval:
            return False
        self.next_eval = (step // self.every + 1) * self.every
        return self.evaluate(step, policy)

    def evaluate(self, step: int, policy: Any) -> bool:
        train_s = self.train_seconds()
        t0 = time.perf_counter()
        episodes = run_episodes(TASK.env_id, {}, policy, self.episodes, 5, EVAL_SEED, deterministic=True)
        self.eval_seconds += time.perf_counter() - t0
        mean = float(np.mean(episodes.returns))
        self.result.curve.append((step, mean))
        self.result.final_return = mean
        if mean >= TASK.solved and self.result.solved_step is None:
            self.result.solved_step, self.result.solved_seconds = step, train_s
            return self.stop
        return False


# ---------------------------------------------------------------------- speedflip
def run_speedflip(algo: str, seed: int, budget: int, ev: Evaluator) -> None:
    preset = TASK.presets[algo]
    overrides = [f"run.seed={seed}", f"run.total_steps={budget}", "run.torch_threads=1", "run.device=cpu"]
    cfg = build_config(apply_overrides(load_preset(preset), overrides))
    learner = GymSession(cfg)  # the learner + collector of `speedflip train`, without a run dir
    try:
        while learner.global_step < budget:
            learner.iterate()
            if ev.maybe_eval(learner.global_step, learner.policy()):
                break
        ev.result.train_seconds = ev.train_seconds()
        if not ev.result.curve or ev.result.curve[-1][0] != learner.global_step:
            ev.evaluate(learner.global_step, learner.policy())
    finally:
        learner.close()


# ---------------------------------------------------------------------- Stable-Baselines3
class SB3Policy:
    """Adapts an SB3 model to the evaluation loop (deterministic ``predict``, VecNormalize'd obs if any)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.normalizer = model.get_vec_normalize_env()  # its running stats, frozen while evaluating

    def reset(self, num_envs: int) -> None:
        return None

    def act(self, obs: Array, starts: Array, deterministic: bool) -> Array:
        if self.normalizer is not None:
            obs = self.normalizer.normalize_obs(obs)
        actions, _ = self.model.predict(obs, deterministic=deterministic)
        out: Array = np.asarray(actions)
        return out


def _linear(start: float) -> Callable[[float], float]:
    return lambda progress_remaining: progress_remaining * start


def sb3_model(name: str, seed: int) -> Any:
    """SB3 models. RL-Zoo settings: github.com/DLR-RM/rl-baselines3-zoo, hyperparams/ppo.yml and dqn.yml."""
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    ENV_ID = TASK.env_id
    if name.endswith("-default"):
        cls = PPO if name == "sb3-ppo-default" else DQN
        return cls("MlpPolicy", make_vec_env(ENV_ID, n_envs=1, seed=seed), seed=seed, device="cpu")
    if ENV_ID == "Acrobot-v1" and name == "sb3-ppo":  # zoo: normalize, 16 envs, n_steps 256, batch 64 (default)
        env = VecNormalize(make_vec_env(ENV_ID, n_envs=16, seed=seed))
        return PPO("MlpPolicy", env, n_steps=256, gae_lambda=0.94, gamma=0.99, n_epochs=4, ent_coef=0.0,
                   seed=seed, device="cpu")  # fmt: skip
    if ENV_ID == "Acrobot-v1" and name == "sb3-dqn":  # zoo: gradient_steps -1 = one per env step
        env = make_vec_env(ENV_ID, n_envs=1, seed=seed)
        return DQN("MlpPolicy", env, learning_rate=6.3e-4, batch_size=128, buffer_size=50_000, learning_starts=0,
                   gamma=0.99, target_update_interval=250, train_freq=4, gradient_steps=-1,
                   exploration_fraction=0.12, exploration_final_eps=0.1, policy_kwargs={"net_arch": [256, 256]},
                   seed=seed, device="cpu")  # fmt: skip
    if ENV_ID != "CartPole-v1":
        raise ValueError(f"no RL-Zoo settings here for {ENV_ID}")
    if name == "sb3-ppo":  # RL-Zoo hyperparameters for CartPole-v1
        env = make_vec_env(ENV_ID, n_envs=8, seed=seed)
        return PPO("MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
                   learning_rate=_linear(1e-3), clip_range=_linear(0.2), seed=seed, device="cpu")  # fmt: skip
    if name == "sb3-dqn":  # RL-Zoo hyperparameters for CartPole-v1
        env = make_vec_env(ENV_ID, n_envs=1, seed=seed)
        return DQN("MlpPolicy", env, learning_rate=2.3e-3, batch_size=64, buffer_size=100_000,
                   learning_starts=1000, gamma=0.99, target_update_interval=10, train_freq=256, gradient_steps=128,
                   exploration_fraction=0.16, exploration_final_eps=0.04, policy_kwargs={"net_arch": [256, 256]},
                   seed=seed, device="cpu")  # fmt: skip
    raise ValueError(f"unknown SB3 algorithm {name}")


def run_sb3(name: str, seed: int, budget: int, ev: Evaluator) -> None:
    from stable_baselines3.common.callbacks import BaseCallback

    model = sb3_model(name, seed)
    policy = SB3Policy(model)

    class EvalCallback(BaseCallback):
        def _on_step(self) -> bool:
            return not ev.maybe_eval(self.num_timesteps, policy)

    ev.start = time.perf_counter()  # model construction is not training
    model.learn(total_timesteps=budget, callback=EvalCallback())
    ev.result.train_seconds = ev.train_seconds()
    if not ev.result.curve or ev.result.curve[-1][0] != model.num_timesteps:
        ev.evaluate(model.num_timesteps, policy)


# ---------------------------------------------------------------------- report
def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarize(results: list[RunResult]) -> list[dict[str, Any]]:
    rows = []
    for algo in dict.fromkeys(r.algo for r in results):
        runs = [r for r in results if r.algo == algo]
        solved = [r for r in runs if r.solved_step is not None]
        finals = [r.final_return for r in runs if r.final_return is not None]
        rows.append({
            "algo": algo,
            "budget": runs[0].budget,
            "seeds": len(runs),
            "solved": len(solved),
            "median_steps_to_solve": _median([float(r.solved_step or 0) for r in solved]),
            "steps_to_solve": [r.solved_step for r in runs],
            "median_seconds_to_solve": _median([r.solved_seconds or 0.0 for r in solved]),
            "seconds_to_solve": [None if r.solved_seconds is None else round(r.solved_seconds, 1) for r in runs],
            "final_return_mean": float(np.mean(finals)) if finals else None,
            "final_return_std": float(np.std(finals)) if finals else None,
            "train_seconds_mean": float(np.mean([r.train_seconds for r in runs])),
        })  # fmt: skip
    return rows


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    def fmt(value: Any, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    goal = f"{TASK.solved:g}"
    lines = [
        f"{TASK.env_id}, {args.seeds} seeds, evaluation every {args.eval_every:,} steps on {args.eval_episodes} "
        f"deterministic episodes; solved = mean evaluation return >= {goal}. Wall-clock is training time "
        "only (evaluation excluded), one torch thread"
        + (", runs stopped once solved (no final return)." if args.stop_when_solved else "."),
        "",
        f"| algorithm | budget | solved | steps to {goal} (median; per seed) | seconds to {goal} (median; per seed) "
        "| final return (mean ± std) | training s (mean) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        per_steps = ", ".join("-" if s is None else f"{s / 1000:.0f}k" for s in r["steps_to_solve"])
        per_secs = ", ".join("-" if s is None else f"{s:.0f}" for s in r["seconds_to_solve"])
        final = "-" if r["final_return_mean"] is None or args.stop_when_solved else (
            f"{r['final_return_mean']:.0f} ± {r['final_return_std']:.0f}")  # fmt: skip
        lines.append(
            f"| {r['algo']} | {r['budget']:,} | {r['solved']}/{r['seeds']} | "
            f"{fmt(r['median_steps_to_solve'], ',.0f')} ({per_steps}) | "
            f"{fmt(r['median_seconds_to_solve'], '.1f')} ({per_secs}) | {final} | {r['train_seconds_mean']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="CartPole-v1", choices=sorted(TASKS))
    parser.add_argument("--algos", default="sf-ppo,sb3-ppo,sf-dqn,sb3-dqn")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--ppo-budget", type=int, help="env steps per PPO run (default: the task's)")
    parser.add_argument("--dqn-budget", type=int, help="env steps per DQN run (default: the task's)")
    parser.add_argument("--eval-every", type=int, default=5_000)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--stop-when-solved", action="store_true", help="end a run at its first solved evaluation")
    parser.add_argument("--json", help="write every run (with its evaluation curve) here")
    parser.add_argument("--markdown", help="write the summary table here")
    parser.add_argument("--merge", nargs="+", metavar="JSON", help="only rebuild the table from earlier --json files")
    args = parser.parse_args(argv)
    global TASK
    TASK = TASKS[args.env]
    args.ppo_budget = args.ppo_budget or TASK.budgets["ppo"]
    args.dqn_budget = args.dqn_budget or TASK.budgets["dqn"]
    torch.set_num_threads(1)
    results: list[RunResult] = []
    if args.merge:
        for path in args.merge:
            results += [RunResult(**{**run, "curve": [tuple(p) for p in run["curve"]]})
                        for run in json.loads(Path(path).read_text())["runs"]]  # fmt: skip
        args.seeds = len({r.seed for r in results})
        return report(results, args)
    algos = args.algos.split(",")
    unknown = [a for a in algos if not a.startswith(("sf-", "sb3-"))]
    if unknown:
        parser.error(f"unknown algorithm(s) {unknown}")
    # seed-major order: every algorithm sees the same machine load, more or less
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for algo in algos:
            kind = "ppo" if "ppo" in algo else "dqn"
            budget = args.ppo_budget if kind == "ppo" else args.dqn_budget
            result = RunResult(algo, seed, budget)
            ev = Evaluator(result, args.eval_every, args.eval_episodes, args.stop_when_solved)
            if algo.startswith("sf-"):
                run_speedflip(kind, seed, budget, ev)
            else:
                run_sb3(algo, seed, budget, ev)
            results.append(result)
            print(
                f"{algo} seed {seed}: solved at {result.solved_step} steps / "
                f"{'-' if result.solved_seconds is None else f'{result.solved_seconds:.1f}'} s, "
                f"final {result.final_return}, train {result.train_seconds:.1f} s",
                flush=True,
            )
    return report(results, args)


def report(results: list[RunResult], args: argparse.Namespace) -> int:
    """Print the summary table; write ``--json`` / ``--markdown`` when asked."""
    results = sorted(results, key=lambda r: r.seed)
    rows = summarize(results)
    table = markdown(rows, args)
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": [asdict(r) for r in results], "summary": rows}, indent=2))
    if args.markdown:
        Path(args.markdown).write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
