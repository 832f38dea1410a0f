"""Time the pool opponents' inference per environment step: one forward per snapshot vs one stacked pass.

Builds the 1v1 preset's env (64 arenas) and a matchmaker with ``selfplay.opponent_share`` of the arenas
against the pool, fills the pool with up to ``--snapshots`` milestones of a run, draws opponents, and
times ``Matchmaker.fill_opponent_actions`` (stacked, as training does now) against the same step done
as before the stacking (each snapshot's network over every car, then its rows picked). Prints
milliseconds per step and the speed-up; ``--json`` writes them.

    python benchmarks/pool_inference.py --milestones runs/1v1/milestones/main --snapshots 8
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from speedflip.checkpoint import list_checkpoints
from speedflip.config import build_config, load_preset
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.selfplay.matchmaker import Matchmaker


def per_snapshot_step(mm: Matchmaker, actions: np.ndarray, obs: np.ndarray, state: object) -> np.ndarray:
    """The step as it was before stacking: every snapshot's network over every car."""
    out = actions.copy()
    C = mm.num_cars
    for index in np.unique(mm.opponent[: mm.pool_arenas]).tolist():
        arenas = np.flatnonzero(mm.opponent[: mm.pool_arenas] == index)
        rows = (arenas[:, None] * C + np.arange(C)[None, :]).reshape(-1)
        rows = rows[~mm.learner_rows[rows]]
        chosen = mm._policy(mm.members[index]).act(obs, state, mm.car_teams)  # type: ignore[arg-type]
        out[rows] = chosen[rows]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--milestones", required=True, help="a run's milestones/<stage> folder")
    p.add_argument("--snapshots", type=int, default=8, help="snapshots in the pool (default 8, the pool size)")
    p.add_argument("--share", type=float, default=0.25, help="selfplay.opponent_share (default 0.25)")
    p.add_argument("--steps", type=int, default=300, help="timed steps per variant (default 300)")
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args()
    torch.set_num_threads(1)  # collection's thread count
    cfg = build_config(load_preset("1v1"))
    env = RocketLeagueVecEnv(cfg.env, seed=0)
    env.reset()
    sp = cfg.selfplay.model_copy(update={"include_rule": False, "pool_size": args.snapshots, "sampling": "uniform"})
    mm = Matchmaker(sp, args.share, env.num_arenas, env.car_teams, env.actions.table, env.obs_dim, None, seed=0)
    for path in sorted(list_checkpoints(Path(args.milestones)), key=lambda q: int(q.name))[-args.snapshots :]:
        mm.add_snapshot(path)
    mm.sample(np.arange(env.num_arenas))
    in_play = len(np.unique(mm.opponent[: mm.pool_arenas]))
    actions = np.zeros(env.num_agents, np.int64)
    obs, state = env.obs, env.state
    timings = {}
    for name, step in (
        ("per_snapshot", lambda: per_snapshot_step(mm, actions, obs, state)),
        ("stacked", lambda: mm.fill_opponent_actions(actions, obs, state)),
    ):
        for _ in range(20):
            step()  # warm-up (loads the networks)
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        timings[name] = (time.perf_counter() - start) / args.steps * 1000.0
    env.close()
    result = {
        "arenas": env.num_arenas,
        "pool_arenas": mm.pool_arenas,
        "snapshots_in_pool": len(mm.members),
        "snapshots_in_play": in_play,
        "ms_per_step_per_snapshot": timings["per_snapshot"],
        "ms_per_step_stacked": timings["stacked"],
        "speedup": timings["per_snapshot"] / timings["stacked"],
        "load_average": os.getloadavg(),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
