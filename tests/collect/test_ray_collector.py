"""``run.collector: ray`` on a real multi-node Ray cluster (``ray.cluster_utils.Cluster``: a head and a
worker node, each its own raylet and object store, on this machine).

One cluster serves the whole module (starting one takes seconds); every test uses tiny networks and
budgets. Marked ``ci``: ``make test`` runs them (the ``ray`` extra is installed there).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from speedflip.algos.ppo import Batch
from speedflip.config import Config, ConfigError, resolve_config
from speedflip.train.trainer import Trainer

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.ci, pytest.mark.timeout(300)]

OBJECT_STORE_BYTES = 80 * 2**20
TINY = [
    "env.num_arenas=2", "ppo.num_steps=16", "ppo.minibatch_size=64", "ppo.update_epochs=2",
    "ppo.policy_layers=[16]", "ppo.critic_layers=[16]", "run.device=cpu", "run.torch_threads=1",
    "run.update_torch_threads=1", "run.tensorboard=false", "run.milestone_replays=false",
]  # fmt: skip
STEPS_PER_ROLLOUT = 2 * 2 * 16  # 2 arenas x 2 cars (quick is 1v1) x 16 steps


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head node and one worker node, 1 CPU each, so two 1-CPU actors land one per node."""
    head = {"num_cpus": 1, "object_store_memory": OBJECT_STORE_BYTES, "include_dashboard": False,
            "_system_config": {"worker_niceness": 0}}  # fmt: skip  # actors not niced, as in speedflip's local cluster
    c = Cluster(initialize_head=True, head_node_args=head)
    c.add_node(num_cpus=1, object_store_memory=OBJECT_STORE_BYTES)
    c.wait_for_nodes()
    ray.init(address=c.address, configure_logging=False, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


def ray_config(cluster: Any, *overrides: str) -> Config:
    return resolve_config("quick", overrides=[*TINY, "run.collector=ray", f"run.ray_address={cluster.address}",
                                              *overrides])  # fmt: skip


def test_train_checkpoint_resume_over_two_nodes(cluster: Any, tmp_path: Path) -> None:
    """`speedflip train` in its own process joins the cluster (run.ray_address), trains with one actor on
    each node, checkpoints, and a second start resumes from the checkpoint."""
    run_dir = tmp_path / "run"

    def train(total_steps: int) -> list[dict[str, Any]]:
        sets = [*TINY, "run.collector=ray", f"run.ray_address={cluster.address}", "run.ray_actors=2",
                f"run.total_steps={total_steps}", f"run.checkpoint_interval_steps={4 * STEPS_PER_ROLLOUT}"]  # fmt: skip
        cmd = [sys.executable, "-m", "speedflip.cli", "train", "--preset", "quick", "--run-dir", str(run_dir)]
        for s in sets:
            cmd += ["--set", s]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=False)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]

    first = train(8 * STEPS_PER_ROLLOUT)
    assert first[-1]["global_step"] >= 8 * STEPS_PER_ROLLOUT
    assert first[-1]["ray/nodes_contributing"] == 2  # rollouts from the head and the worker node
    # the default run.max_policy_lag=0: both actors' rollouts in every batch, acted by the current weights
    assert all(r["ray/actors_in_batch"] == 2 and r["perf/policy_lag"] == 0 for r in first)
    saved = sorted(int(p.name) for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit())
    assert saved and saved[-1] == first[-1]["global_step"]

    both = train(12 * STEPS_PER_ROLLOUT)
    resumed = both[len(first) :]
    assert resumed[0]["global_step"] == saved[-1] + 2 * STEPS_PER_ROLLOUT  # continued the step counter
    assert resumed[0]["iteration"] == first[-1]["iteration"] + 1  # and the learner's version
    assert resumed[-1]["global_step"] >= 12 * STEPS_PER_ROLLOUT


def test_a_killed_actor_is_restarted_and_the_run_goes_on(cluster: Any) -> None:
    cfg = ray_config(cluster, "run.ray_actors=2", "run.max_policy_lag=2")
    trainer = Trainer(cfg)
    try:
        collector = trainer.collector

        def iterate() -> dict[str, Any]:
            batch, raw_obs, _ = trainer.collect()
            trainer.update(batch, raw_obs)
            return dict(collector.metrics())

        for _ in range(3):
            iterate()
        version, step = trainer.learner.version, trainer.global_step
        os.kill(collector.pids[1], signal.SIGKILL)  # type: ignore[union-attr]
        deadline = time.monotonic() + 120
        restarts = 0.0
        while restarts < 1 and time.monotonic() < deadline:
            restarts = float(iterate()["health/actor_restarts"] or 0)
        assert restarts == 1
        # what was trained before the kill is all there; training went on meanwhile
        assert trainer.learner.version > version and trainer.global_step > step
        assert trainer.global_step == trainer.learner.version * STEPS_PER_ROLLOUT
        before = collector.rollouts_by_node.copy()  # type: ignore[union-attr]
        for _ in range(4):
            iterate()
        after = collector.rollouts_by_node  # type: ignore[union-attr]
        assert sum(after.values()) > sum(before.values())
        assert collector.metrics()["health/dead_actors"] == 0
    finally:
        trainer.close()


def test_lag_zero_trains_all_actors_rollouts_together_on_current_weights(cluster: Any) -> None:
    cfg = ray_config(cluster, "run.ray_actors=2", "run.max_policy_lag=0")
    trainer = Trainer(cfg)
    try:
        for _ in range(3):
            version = trainer.learner.version
            batch, raw_obs, stats = trainer.collect()
            assert stats.policy_version == version  # acted by the weights that now train on it
            assert stats.steps == 2 * STEPS_PER_ROLLOUT  # both actors' rollouts in one batch
            assert raw_obs.shape[:2] == (16, 2 * 4)  # 16 steps x (2 actors x 2 arenas x 2 cars)
            # quick kickstarts from the rule bot: every actor labels its own rows, the merge keeps them
            assert isinstance(batch, Batch) and batch.teacher_actions is not None
            assert batch.teacher_actions.shape == (16 * 2 * 4,)
            trainer.update(batch, raw_obs)
        metrics = trainer.collector.metrics()
        assert metrics["perf/policy_lag"] == 0 and metrics["ray/actors_in_batch"] == 2
        assert (metrics["health/dropped_stale_rollouts"] or 0) == 0
        assert trainer.global_step == 3 * 2 * STEPS_PER_ROLLOUT
    finally:
        trainer.close()


def test_lag_one_drops_stale_rollouts(cluster: Any) -> None:
    """Two actors, lag 1: three rollouts are acted by version 0 (both actors' first, and the one the first
    actor starts while version 0 trains) but at most two are trained at lag <= 1, so one is dropped once it
    is ready (it waits at most one more rollout of the other actor)."""
    cfg = ray_config(cluster, "run.ray_actors=2", "run.max_policy_lag=1")
    trainer = Trainer(cfg)
    try:
        for _ in range(6):
            version = trainer.learner.version
            batch, raw_obs, stats = trainer.collect()
            assert version - stats.policy_version <= 1
            assert stats.steps == STEPS_PER_ROLLOUT  # one actor's rollout at a time
            trainer.update(batch, raw_obs)
        assert (trainer.collector.metrics()["health/dropped_stale_rollouts"] or 0) >= 1
    finally:
        trainer.close()


def test_one_actor_with_lag_zero_collects_what_the_in_process_collector_does(cluster: Any) -> None:
    overrides = ("run.ray_actors=1", "run.max_policy_lag=0", "run.seed=11", "run.num_threads=1")
    local = Trainer(resolve_config("quick", overrides=[*TINY, "run.collector=inprocess", *overrides[2:]]))
    remote = Trainer(ray_config(cluster, *overrides))
    try:
        for _ in range(3):
            # the Ray collector first: its first task hands this process's torch RNG state (where the local
            # trainer's acting stream starts too) to the actor
            b2, raw2, s2 = remote.collect()
            b1, raw1, s1 = local.collect()
            assert s1.policy_version == s2.policy_version
            np.testing.assert_array_equal(raw1, raw2)
            for name in ("obs", "actions", "log_probs", "values", "advantages", "returns"):
                assert bool((getattr(b1, name) == getattr(b2, name)).all()), name
            assert s1.episode_returns == s2.episode_returns
            local.update(b1, raw1)
            remote.update(b2, raw2)
    finally:
        local.close()
        remote.close()


def test_a_node_with_other_versions_is_refused(cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from speedflip.collect import ray_collector

    learner = {**ray_collector.node_versions(), "rocketsim": "0.0.1"}
    monkeypatch.setattr(ray_collector, "node_versions", lambda: learner)
    with pytest.raises(ConfigError, match=r"rocketsim .* there, 0\.0\.1 on the learner.*install the learner's"):
        ray_collector.RayCollector(ray_config(cluster, "run.ray_actors=1"), 0, None)


def test_more_actors_than_the_cluster_has_cpus_is_a_clear_error(cluster: Any) -> None:
    from speedflip.collect.ray_collector import RayCollector

    with pytest.raises(ConfigError, match=r"run\.ray_actors=3 x run\.ray_cpus_per_actor=1 needs 3 CPUs, .* has 2"):
        RayCollector(ray_config(cluster, "run.ray_actors=3"), 0, None)


def test_pool_games_are_played_by_actors_and_rated_once_on_the_learner(cluster: Any, tmp_path: Path) -> None:
    """Pool arenas in the actors (rule bot, then a milestone shipped through the object store); every
    game they report is rated exactly once by the learner's league, in games.csv with its ratings."""
    import csv

    from speedflip.selfplay.matchmaker import LEARNER

    cfg = ray_config(cluster, "run.ray_actors=2", "run.max_policy_lag=2", "selfplay.opponent_share=0.5",
                     "env.timeout_seconds=0.5", "env.no_touch_timeout_seconds=0.5")  # fmt: skip
    trainer = Trainer(cfg, tmp_path)
    try:
        mm = trainer.matchmaker
        for _ in range(3):
            batch, raw_obs, _ = trainer.collect()
            trainer.update(batch, raw_obs)
        path = trainer.milestone()
        assert path is not None
        for _ in range(6):
            batch, raw_obs, _ = trainer.collect()
            trainer.update(batch, raw_obs)
        mm.flush()
        with (tmp_path / "games.csv").open(newline="") as f:
            rows = list(csv.DictReader(f))
        opponents = {r["player_b"] for r in rows}
        assert "rule" in opponents and f"{path.parent.name}@{path.name}" in opponents  # the milestone played too
        assert mm.league.player(LEARNER).games == len(rows)  # each reported game rated once
        for name in opponents:
            assert mm.league.player(name).games == sum(r["player_b"] == name for r in rows), name
        assert float(rows[-1]["rating_a"]) == pytest.approx(mm.learner_elo)  # the learner's ratings, in order
    finally:
        trainer.close()
