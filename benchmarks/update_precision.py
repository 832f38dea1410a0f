"""The PPO update in float32 and in bfloat16 autocast (``run.update_precision``): time and rounding.

Time: one preset's networks and rollout size (random observations, the preset's minibatch and
epochs), ``ppo_update`` timed at 1 and 2 torch threads in each precision; milliseconds per 1000 agent
steps (best of ``--repeats``), the figure ``speedflip bench`` reports as "PPO update".

Rounding (with ``--run``): the run's newest checkpoint collects one rollout of its own; the approximate
KL between its float32 log-probabilities and the same policy evaluated under bfloat16 autocast is the
noise rounding adds to every PPO ratio (the whole update moves the policy by ~1e-3 to 1e-2), shown
with every layer in bfloat16 and as trained (output layers in float32).

    python benchmarks/update_precision.py --preset 1v1 --json benchmarks/results/2core-update-precision-1v1.json
    python benchmarks/update_precision.py --preset 1v1 --run runs/my-1v1   # + rounding on a trained policy
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import torch

from speedflip.accel import cpu_has_native_bfloat16, make_gradient_step
from speedflip.algos.ppo import Batch, ppo_update
from speedflip.checkpoint import list_checkpoints
from speedflip.config import Config, resolve_config
from speedflip.env.obs import observation_size
from speedflip.models.mlp import ActorCritic


def time_update(cfg: Config, obs_dim: int, num_actions: int, precision: str, threads: int, repeats: int) -> float:
    """Milliseconds per 1000 agent steps of one PPO update on a rollout of the preset's size (best of repeats)."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    rows = cfg.env.num_agents * cfg.ppo.num_steps
    model = ActorCritic(obs_dim, num_actions, cfg.ppo.policy_layers, cfg.ppo.critic_layers)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.ppo.learning_rate, eps=1e-5)
    batch = Batch(
        obs=torch.randn(rows, obs_dim), actions=torch.randint(0, num_actions, (rows,)),
        log_probs=torch.full((rows,), -float(torch.log(torch.tensor(float(num_actions))))),
        values=torch.zeros(rows), advantages=torch.randn(rows), returns=torch.randn(rows),
    )  # fmt: skip
    step = make_gradient_step(torch.device("cpu"), amp=False, precision=precision)
    generator = torch.Generator().manual_seed(1)
    ppo_update(model, optimizer, batch, cfg.ppo, generator, step)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        ppo_update(model, optimizer, batch, cfg.ppo, generator, step)
        best = min(best, time.perf_counter() - start)
    return best / rows * 1e6


def rounding_kl(run: Path) -> dict[str, float]:
    """Approximate KL and clip fraction from bfloat16 rounding alone, on the run's newest checkpoint's own rollout."""
    import yaml

    from speedflip.config import build_config
    from speedflip.models.mlp import forward_float32_output
    from speedflip.train.trainer import Trainer

    cfg = build_config(yaml.safe_load((run / "config.yaml").read_text()), str(run / "config.yaml"))
    cfg = cfg.model_copy(update={"run": cfg.run.model_copy(update={"tensorboard": False, "collector": "inprocess"})})
    trainer = Trainer(cfg)
    try:
        trainer.load(list_checkpoints(run / "checkpoints")[0])
        batch, _, _ = trainer.collect()
        model = trainer.model
        assert isinstance(model, ActorCritic) and isinstance(batch, Batch)
        out: dict[str, float] = {}
        with torch.no_grad():
            reference = model.head.log_prob_entropy(model.policy(batch.obs), batch.actions, None)[0]
            for name, float32_output in (("all_bfloat16", False), ("float32_output", True)):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    logits = (
                        forward_float32_output(model.policy, batch.obs) if float32_output else model.policy(batch.obs)
                    )
                log_ratio = model.head.log_prob_entropy(logits.float(), batch.actions, None)[0] - reference
                ratio = log_ratio.exp()
                out[f"approx_kl_{name}"] = float(((ratio - 1) - log_ratio).mean())
                out[f"clip_fraction_{name}"] = float(((ratio - 1).abs() > cfg.ppo.clip_coef).float().mean())
        return out
    finally:
        trainer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="1v1")
    parser.add_argument("--actions", type=int, default=90, help="action table size (default lookup table: 90)")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--run", type=Path, help="a run directory: also measure the rounding on its newest checkpoint")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cfg = resolve_config(args.preset, overrides=args.set)
    e = cfg.env
    obs_dim = observation_size(
        e.obs_builder, e.blue_size, e.orange_size, e.obs_team_size, e.nearest_pads, e.frame_stack
    )
    results: dict[str, Any] = {
        "preset": args.preset, "overrides": args.set, "cores": os.cpu_count(),
        "native_bfloat16": cpu_has_native_bfloat16(), "load_average_1min_before": os.getloadavg()[0],
        "rows_per_update": cfg.env.num_agents * cfg.ppo.num_steps, "obs_dim": obs_dim, "ms_per_1000_agent_steps": {},
    }  # fmt: skip
    for threads in (1, 2):
        for precision in ("float32", "bfloat16"):
            ms = time_update(cfg, obs_dim, args.actions, precision, threads, args.repeats)
            results["ms_per_1000_agent_steps"][f"{precision}_threads{threads}"] = ms
            print(f"{precision:9s} torch threads {threads}: {ms:6.1f} ms per 1000 agent steps")
    if args.run is not None:
        results["rounding"] = rounding_kl(args.run)
        for key, value in results["rounding"].items():
            print(f"{key}: {value:.2e}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
