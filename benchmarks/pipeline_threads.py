"""Would in-process collection gain from pipelining with threads? Sequential against two half-arena groups.

The trainer's in-process loop acts for every agent, then steps every arena (physics in a thread pool, observations and
rewards on the main thread), so one core idles while the other runs Python. This measures the obvious fix before
anyone builds it into the collector: two groups of half the arenas, each group's whole env step run in a background
thread while the main thread acts for the other group (the overlap `speedflip bench` measures with worker processes
as "pipelined"). Both loops do the same per-step work the collector does besides the policy: the rule bot asked for
every car (the kickstart's labels) and the observation normalizer. Rounds alternate, so both see the same machine.

    python benchmarks/pipeline_threads.py --preset 1v1 --seconds 8 --rounds 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch

from speedflip._types import Array
from speedflip.algos.normalize import RunningMeanStd
from speedflip.config import Config, resolve_config
from speedflip.env.vec_env import RocketLeagueVecEnv, StepResult
from speedflip.models.mlp import ActorCritic
from speedflip.selfplay.rule_policy import RulePolicy


class Group:
    """Arenas stepped together, with what acting for them needs."""

    def __init__(self, cfg: Config, num_arenas: int, arena_offset: int, physics_threads: int) -> None:
        env_cfg = cfg.env.model_copy(update={"num_arenas": num_arenas})
        self.env = RocketLeagueVecEnv(
            env_cfg, seed=cfg.run.seed, num_threads=physics_threads, arena_offset=arena_offset
        )
        self.rule = RulePolicy(self.env.actions.table)
        self.obs_rms = RunningMeanStd((self.env.obs_dim,))
        self.obs = self.env.reset()

    @torch.no_grad()
    def act(self, model: ActorCritic) -> Array:
        """The rule bot's rows (as the kickstart asks them) and the policy's sampled actions."""
        self.rule.act(self.env.state, self.env.car_teams)
        action, _log_prob = model.sample(torch.as_tensor(self.obs_rms.normalize(self.obs)))
        actions: Array = action.numpy()
        return actions


def sequential(cfg: Config, model: ActorCritic, seconds: float, cores: int) -> float:
    """The trainer's shape: one group of every arena, physics on every core; agent steps per second."""
    group = Group(cfg, cfg.env.num_arenas, 0, cores)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        group.obs = group.env.step(group.act(model)).obs
        steps += group.env.num_agents
    rate = steps / (time.perf_counter() - start)
    group.env.close()
    return rate


def pipelined(cfg: Config, model: ActorCritic, seconds: float, physics_threads: int) -> float:
    """Two groups of half the arenas; a group's env step runs in a background thread while the main thread acts
    for the other group; agent steps per second."""
    half = cfg.env.num_arenas // 2
    groups = [Group(cfg, half, 0, physics_threads), Group(cfg, cfg.env.num_arenas - half, half, physics_threads)]
    pool = ThreadPoolExecutor(len(groups))
    pending: list[Future[StepResult]] = [pool.submit(g.env.step, g.act(model)) for g in groups]
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for i, group in enumerate(groups):
            group.obs = pending[i].result().obs
            pending[i] = pool.submit(group.env.step, group.act(model))
            steps += group.env.num_agents
    rate = steps / (time.perf_counter() - start)
    for future in pending:
        future.result()
    pool.shutdown()
    for group in groups:
        group.env.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="1v1")
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds per loop per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cfg = resolve_config(preset=args.preset)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    torch.set_num_threads(1)  # the trainer's collection count on 2 cores (half the cores)
    probe = RocketLeagueVecEnv(cfg.env.model_copy(update={"num_arenas": 1}))
    model = ActorCritic(probe.obs_dim, probe.num_actions, cfg.ppo.policy_layers, cfg.ppo.critic_layers)
    probe.close()
    loops = {
        "sequential": lambda: sequential(cfg, model, args.seconds, cores),
        "pipelined_threads_1_physics_thread_per_group": lambda: pipelined(cfg, model, args.seconds, 1),
        f"pipelined_threads_{cores}_physics_threads_per_group": lambda: pipelined(cfg, model, args.seconds, cores),
    }
    rates: dict[str, list[float]] = {name: [] for name in loops}
    for r in range(args.rounds):
        for name, loop in loops.items():
            rates[name].append(loop())
        print(f"round {r + 1}: " + "  ".join(f"{n} {v[-1]:,.0f}" for n, v in rates.items()), flush=True)
    medians = {name: statistics.median(v) for name, v in rates.items()}
    base = medians["sequential"]
    for name, value in medians.items():
        print(f"{name}: {value:,.0f} agent steps/s ({value / base:.2f}x)")
    if args.json is not None:
        out: dict[str, Any] = {
            "benchmark": "pipeline_threads", "preset": args.preset, "cores": cores, "seconds": args.seconds,
            "rounds": rates, "median_agent_sps": medians,
            "ratio_to_sequential": {n: v / base for n, v in medians.items()},
            "num_arenas": cfg.env.num_arenas, "numpy": np.__version__, "torch": torch.__version__,
        }  # fmt: skip
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
