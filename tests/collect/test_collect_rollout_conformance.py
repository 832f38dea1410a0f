"""Rollout-level conformance: the in-process and the multi-process backend give the same Rollout.

Two :class:`ArenaCollector` s on one config (4 arenas 1v1, pure self-play, 32-step rollouts, episodes of a
second or two so that resets and truncation bootstraps happen inside every rollout), one on each backend,
with the same seeds and the same :class:`PolicyWeights`, and torch's global generator (which samples the
actions) seeded identically before each collect: every array of two consecutive rollouts must be equal,
and so must the episode statistics (everything but the wall-clock ``collect_seconds``).

Known difference (measured, not a trajectory difference): ``stats.reward_means``, the per-component reward
means logged per rollout, differ in the 8th significant digit. The in-process env takes each component's
mean over all agents in float32 (``RewardFunction.__call__``: ``float(value.mean())`` of a float32 array);
each worker takes it over its own agents in float32 and the parent averages the workers' means weighted by
arena count in float64 (``MultiProcessVecEnv.reward_means``): two summation orders and roundings. The
trajectories, rewards and every other statistic are bit-identical. :func:`test_reward_means_are_bit_identical`
keeps the exact check as a strict xfail so that it fails (and is to be un-marked) once both sides reduce
the same way, e.g. workers publishing float64 component sums and agent counts that the parent adds up.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from speedflip._types import Array
from speedflip.algos.normalize import RunningMeanStd
from speedflip.collect.arena_collector import ArenaCollector
from speedflip.collect.multiprocess import MultiProcessVecEnv
from speedflip.config import Config, build_config
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.models.build import PolicyModel, build_policy_model
from speedflip.rollout import PolicyWeights, Rollout

ARRAY_FIELDS = (
    "obs", "raw_obs", "actions", "log_probs", "values", "rewards", "terminated", "truncated", "truncation_values",
    "last_values",
)  # fmt: skip


def conformance_config(collector: str, normalize_obs: bool) -> Config:
    return build_config(
        {
            "env": {
                "num_arenas": 4,
                "blue_size": 1,
                "orange_size": 1,
                "obs_team_size": 1,
                "timeout_seconds": 1.5,
                "no_touch_timeout_seconds": 1.0,
                "state_setters": {"kickoff": 0.5, "random": 0.5},
            },
            "ppo": {
                "num_steps": 32,
                "minibatch_size": 64,
                "policy_layers": [32],
                "critic_layers": [32],
                "normalize_obs": normalize_obs,
            },
            "selfplay": {"opponent_share": 0.0},
            "run": {
                "seed": 5,
                "device": "cpu",
                "collector": collector,
                "num_workers": 2,
                "num_threads": 2,
                "torch_threads": 1,
                "tensorboard": False,
            },
        }
    )


def make_collector(cfg: Config) -> ArenaCollector:
    def factory(obs_dim: int, num_actions: int) -> PolicyModel:
        return build_policy_model(cfg, obs_dim, num_actions)

    return ArenaCollector(cfg, 0, factory, torch.device("cpu"), None)


def assert_same_rollout(a: Rollout, b: Rollout, which: int) -> None:
    for name in ARRAY_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape, f"rollout {which}: {name} dtype/shape"
        np.testing.assert_array_equal(x, y, err_msg=f"rollout {which}: {name}")
    for name in ("masks", "starts", "states", "next_obs"):
        assert getattr(a, name) is None and getattr(b, name) is None, name
    sa = {k: v for k, v in dataclasses.asdict(a.stats).items() if k not in ("collect_seconds", "reward_means")}
    sb = {k: v for k, v in dataclasses.asdict(b.stats).items() if k not in ("collect_seconds", "reward_means")}
    assert sa == sb, f"rollout {which}: episode stats differ"
    # the logged reward means: equal up to float32 rounding (see the module doc; exact check below, xfail)
    assert a.stats.reward_means.keys() == b.stats.reward_means.keys()
    for name, mean in a.stats.reward_means.items():
        assert mean == pytest.approx(b.stats.reward_means[name], rel=1e-6, abs=1e-9), f"rollout {which}: {name}"


def collect_both(normalize_obs: bool, rollouts: int = 2) -> list[tuple[Rollout, Rollout]]:
    """``rollouts`` consecutive rollouts of an in-process and a 2-worker collector with the same weights."""
    inproc = make_collector(conformance_config("inprocess", normalize_obs))
    try:
        multi = make_collector(conformance_config("multiprocess", normalize_obs))
    except BaseException:
        inproc.close()
        raise
    try:
        assert isinstance(inproc.env, RocketLeagueVecEnv)
        assert isinstance(multi.env, MultiProcessVecEnv) and multi.env.num_workers == 2
        env = inproc.env
        torch.manual_seed(123)
        model = build_policy_model(inproc.cfg, env.obs_dim, env.num_actions)
        obs_rms: dict[str, Array] | None = None
        if normalize_obs:  # statistics that are not the identity, in the format RunningMeanStd saves
            rng = np.random.default_rng(0)
            rms = RunningMeanStd((env.obs_dim,))
            rms.load_state_dict(
                {
                    "mean": rng.normal(0.0, 0.1, env.obs_dim),
                    "var": rng.uniform(0.5, 2.0, env.obs_dim),
                    "count": np.array(1e3),
                }
            )
            obs_rms = rms.state_dict()
        weights = PolicyWeights(0, {k: v.clone() for k, v in model.state_dict().items()}, obs_rms)
        pairs = []
        for which in range(rollouts):
            torch.manual_seed(1000 + which)
            a = inproc.collect(weights, global_step=which)
            torch.manual_seed(1000 + which)
            b = multi.collect(weights, global_step=which)
            pairs.append((a, b))
        assert inproc.env.get_rng_state() == multi.env.get_rng_state()
        return pairs
    finally:
        inproc.close()
        multi.close()


@pytest.mark.parametrize("normalize_obs", [False, True])
def test_both_backends_collect_the_same_rollouts(normalize_obs: bool) -> None:
    pairs = collect_both(normalize_obs)
    for which, (a, b) in enumerate(pairs):
        assert_same_rollout(a, b, which)
    truncated = sum(int(a.truncated.sum()) for a, _ in pairs)
    resets = sum(int((a.truncated | a.terminated).sum()) for a, _ in pairs)
    assert truncated > 0, "the test should cover truncation bootstraps"
    assert resets > 4, "the test should cover resets inside the rollouts"


@pytest.mark.xfail(
    strict=True,
    reason="reward means are reduced in float32 over different agent sets (all agents vs per worker, then a "
    "float64 weighted mean): they differ in the 8th digit; see the module doc",
)
def test_reward_means_are_bit_identical() -> None:
    (a, b), *_ = collect_both(normalize_obs=False, rollouts=1)
    assert a.stats.reward_means == b.stats.reward_means
