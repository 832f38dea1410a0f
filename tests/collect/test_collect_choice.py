"""Which backend a config resolves to, and that the factory builds it."""

from __future__ import annotations

import numpy as np

from speedflip.collect import AUTO_MULTIPROCESS_MIN_CORES, CollectorPlan, choose_collector, make_vec_env
from speedflip.collect.multiprocess import MultiProcessVecEnv
from speedflip.config import build_config
from speedflip.env.vec_env import RocketLeagueVecEnv


def test_auto_follows_the_core_count() -> None:
    cfg = build_config({"env": {"num_arenas": 64}})
    small = choose_collector(cfg, cores=AUTO_MULTIPROCESS_MIN_CORES - 1)
    big = choose_collector(cfg, cores=AUTO_MULTIPROCESS_MIN_CORES * 4)
    assert small.backend == "inprocess" and small.physics_threads == AUTO_MULTIPROCESS_MIN_CORES - 1
    assert big.backend == "multiprocess" and big.num_workers == AUTO_MULTIPROCESS_MIN_CORES * 4
    assert big.physics_threads == 1
    assert "auto" in small.reason and "auto" in big.reason


def plan_for(cores: int, num_arenas: int = 64, **run: object) -> CollectorPlan:
    cfg = build_config({"env": {"num_arenas": num_arenas}, "ppo": {"minibatch_size": 64}, "run": run})
    return choose_collector(cfg, cores=cores)


def test_explicit_choices_win() -> None:
    plan = plan_for(2, num_arenas=3, collector="multiprocess", num_workers=8)
    assert plan.backend == "multiprocess" and plan.num_workers == 3  # never more workers than arenas
    assert plan_for(64, collector="inprocess", num_threads=3).physics_threads == 3
    plan = plan_for(16, collector="multiprocess", num_threads=8)
    assert (plan.num_workers, plan.physics_threads) == (16, 1)
    assert plan_for(16, collector="multiprocess", num_workers=2, num_threads=8).physics_threads == 4


def test_factory_builds_each_backend() -> None:
    base = {"env": {"num_arenas": 2}, "ppo": {"minibatch_size": 64}}
    for collector, kind in (("inprocess", RocketLeagueVecEnv), ("multiprocess", MultiProcessVecEnv)):
        cfg = build_config({**base, "run": {"collector": collector, "num_workers": 2, "seed": 4}})
        env = make_vec_env(cfg)
        try:
            assert isinstance(env, kind)
            obs = env.reset()
            assert obs.shape == (env.num_agents, env.obs_dim)
            result = env.step(np.zeros(env.num_agents, np.int64))
            assert result.rewards.shape == (env.num_agents,)
        finally:
            env.close()
