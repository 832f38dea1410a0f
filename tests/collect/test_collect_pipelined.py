"""The pipelined collector (``run.collector: pipelined``): two groups of worker processes stepped in turn, the
parent acting for one group while the other simulates. It must play exactly the games the other backends play:
same seed and actions, same trajectories; same policy, same rollout (labels, pool opponents, rated games)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from speedflip.algos.ppo_learner import PPOLearner
from speedflip.collect import choose_collector, make_vec_env
from speedflip.collect.arena_collector import ArenaCollector
from speedflip.collect.pipelined import PipelinedVecEnv, group_spans
from speedflip.config import Config, ConfigError, EnvConfig, build_config
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.models.build import PolicyModel, build_policy_model
from speedflip.rollout import Rollout
from speedflip.selfplay.matchmaker import Matchmaker


def pipelined_config(collector: str = "pipelined", **run: object) -> Config:
    """4 arenas of 1v1 with 3 pool arenas (the rule bot), so both groups hold pool arenas; random states (the rule
    bot's rows vary); 1-second episodes (15 steps), so games end and are rated within one rollout of 24 steps; the
    kickstart labels every learner state."""
    return build_config(
        {
            "env": {
                "num_arenas": 4, "blue_size": 1, "orange_size": 1, "state_setters": {"random": 1.0},
                "timeout_seconds": 1.0,
            },
            "ppo": {
                "num_steps": 24, "minibatch_size": 24, "update_epochs": 1, "policy_layers": [16],
                "critic_layers": [16], "kickstart_coef": 1.0, "kickstart_steps": 1000,
            },
            "selfplay": {"opponent_share": 0.75, "rule_share": 1.0},
            "run": {"seed": 5, "device": "cpu", "collector": collector, "num_threads": 1, "torch_threads": 1, **run},
        }
    )  # fmt: skip


def test_group_spans_split_the_arenas_into_contiguous_near_equal_groups() -> None:
    assert group_spans(5, 2) == [(0, 2), (2, 5)]
    assert group_spans(64, 2) == [(0, 32), (32, 64)]
    assert group_spans(3, 3) == [(0, 1), (1, 2), (2, 3)]
    with pytest.raises(ValueError, match="1 arenas cannot be split into 2 groups"):
        group_spans(1, 2)


def test_pipelined_env_steps_the_same_trajectories_as_in_process() -> None:
    """Every arena keeps its global reset stream in its group (``arena_offset``), so with the same seed and actions
    the groups together are the in-process env, resets included (0.5-second episodes end every 8 steps)."""
    cfg = EnvConfig(num_arenas=3, blue_size=1, orange_size=1, timeout_seconds=0.5, state_setters={"random": 1.0})
    reference = RocketLeagueVecEnv(cfg, seed=11)
    pipelined = PipelinedVecEnv(cfg, seed=11, workers_per_group=1)
    try:
        assert pipelined.spans == [(0, 1), (1, 3)]
        np.testing.assert_array_equal(pipelined.reset(), reference.reset())
        assert pipelined.get_rng_state() == reference.get_rng_state()
        rng = np.random.default_rng(0)
        ends = 0
        for _ in range(20):
            actions = rng.integers(0, reference.num_actions, reference.num_agents)
            want, got = reference.step(actions), pipelined.step(actions)
            for name in ("obs", "rewards", "terminated", "truncated", "final_obs"):
                np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
            np.testing.assert_array_equal(pipelined.state.ball, reference.state.ball)
            ends += int(want.truncated.any())
        assert ends >= 2  # the comparison crossed resets
        assert pipelined.total_agent_seconds == pytest.approx(reference.total_agent_seconds)
    finally:
        reference.close()
        pipelined.close()


def sure_policy(cfg: Config, obs_dim: int, num_actions: int, row: int) -> PolicyModel:
    """A policy that picks table row ``row`` with probability 1 - 1e-40: sampling then draws the same actions
    whatever the order or batch of the draws (the backends draw in different batches)."""
    torch.manual_seed(0)
    model = build_policy_model(cfg, obs_dim, num_actions)
    last = [m for m in model.policy.modules() if isinstance(m, nn.Linear)][-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.zero_()
        last.bias[row] = 100.0
    return model


def collect_once(cfg: Config) -> tuple[ArenaCollector, Rollout, list[dict[str, Any]]]:
    def factory(obs_dim: int, num_actions: int) -> PolicyModel:
        return build_policy_model(cfg, obs_dim, num_actions)

    collector = ArenaCollector(cfg, 0, factory, torch.device("cpu"), None)
    try:
        table = collector.env.actions.table
        forward = np.flatnonzero((table[:, 0] == 1.0) & (np.abs(table[:, 1:]).sum(axis=1) == 0))
        model = sure_policy(cfg, collector.env.obs_dim, collector.env.num_actions, int(forward[0]))
        learner = PPOLearner(cfg, model, torch.device("cpu"), collector.env.obs_dim)
        rollout = collector.collect(learner.policy_weights(), global_step=0)
        games = collector.matchmaker.take_pending_games()
    finally:
        collector.close()
    return collector, rollout, games


def test_pipelined_collector_collects_the_rollout_of_the_in_process_one() -> None:
    """Group by group, the parent labels the learner's states with the rule bot, drives the rule bot in the pool
    arenas of both groups (arenas 0-2 of 4; groups 0-1 and 2-3) and records the same steps, episode ends and
    rated games as in process."""
    runs = {}
    for backend in ("inprocess", "pipelined"):
        cfg = pipelined_config(collector=backend)
        assert choose_collector(cfg, cores=2).backend == backend
        runs[backend] = collect_once(cfg)
    (_, inproc, ip_games), (pl_collector, piped, pl_games) = runs["inprocess"], runs["pipelined"]
    assert isinstance(pl_collector.env, PipelinedVecEnv)
    assert inproc.teacher_actions is not None and piped.teacher_actions is not None
    for name in ("raw_obs", "actions", "teacher_actions", "rewards", "terminated", "truncated"):
        np.testing.assert_array_equal(getattr(piped, name), getattr(inproc, name), err_msg=name)
    for name in ("values", "truncation_values"):  # the critic on other batch shapes: float32 rounding apart
        np.testing.assert_allclose(getattr(piped, name), getattr(inproc, name), rtol=1e-5, atol=1e-6, err_msg=name)
    assert inproc.actions.shape == (24, 5)  # 3 pool arenas x 1 learner car + 1 self-play arena x 2
    # the rule bot drove the opponents: its rows are not all the policy's forward row
    assert len(np.unique(inproc.teacher_actions)) > 1
    assert inproc.truncated.any() and len(ip_games) >= 3  # 1-second games ended and were rated
    assert pl_games == ip_games  # the same games in the same order, so the same ratings
    assert piped.stats.reward_per_step == pytest.approx(inproc.stats.reward_per_step)
    assert inproc.stats.reward_means  # the components' means, each group's read after its own step
    assert piped.stats.reward_means == pytest.approx(inproc.stats.reward_means)
    assert piped.stats.touches_per_minute == pytest.approx(inproc.stats.touches_per_minute)


def test_pipelined_plan_on_two_cores_is_one_worker_per_group() -> None:
    plan = choose_collector(pipelined_config(), cores=2)
    assert (plan.backend, plan.num_workers, plan.physics_threads) == ("pipelined", 2, 1)
    assert choose_collector(pipelined_config(num_workers=6), cores=2).num_workers == 4  # 2 arenas per group
    assert choose_collector(pipelined_config(), cores=8).num_workers == 4  # 7 per group, capped by 2 arenas


def test_pipelined_refuses_recurrent_policies_and_a_single_arena() -> None:
    cfg = pipelined_config()
    recurrent = cfg.model_copy(update={"algo": "ppo_recurrent"})
    with pytest.raises(ConfigError, match=r"run.collector=pipelined cannot drive algo=ppo_recurrent .*algo=ppo"):
        choose_collector(recurrent, cores=2)
    one = cfg.model_copy(update={"env": cfg.env.model_copy(update={"num_arenas": 1})})
    fix = r"env\.num_arenas is 1: set env\.num_arenas >= 2 or run\.collector=inprocess"
    with pytest.raises(ConfigError, match=fix):
        make_vec_env(one)


def test_matchmaker_acts_and_rates_a_group_as_the_rows_of_every_arena() -> None:
    """``first_arena``: the opponents' rows of a group are the same rows of the whole batch, and a game that ends
    in a group is rated once, for its global arena."""
    car_teams = np.array([0, 1])
    env = RocketLeagueVecEnv(EnvConfig(num_arenas=4, blue_size=1, orange_size=1), seed=0)
    try:
        env.reset()
        cfg = pipelined_config().selfplay
        matchmaker = Matchmaker(cfg, 0.75, 4, car_teams, env.actions.table, env.obs_dim, None, seed=1)
        matchmaker.sample(np.arange(4))
        rng = np.random.default_rng(0)
        actions = rng.integers(0, env.num_actions, env.num_agents)
        obs, state = env.reset(), env.state
        whole = matchmaker.fill_opponent_actions(actions, obs, state)
        assert (whole != actions).any()  # the rule bot drove some opponent rows
        group = state.copy()
        second = type(state)(group.ball[2:], group.cars[2:], group.pads[2:], group.scores[2:])
        part = matchmaker.fill_opponent_actions(actions[4:], obs[4:], second, first_arena=2)
        np.testing.assert_array_equal(part, whole[4:])
        ended = np.array([False, False, False, False, True, True, False, False])  # arena 2 (pool) ends
        matchmaker.on_step(ended[4:], np.zeros(4, bool), np.array([1, -1]), global_step=7, first_arena=2)
        games = matchmaker.take_pending_games()
        assert len(games) == 1 and games[0]["step"] == 7
        assert games[0]["score_a"] == 0.0  # orange scored; the learner is blue in even arenas
        np.testing.assert_array_equal(matchmaker.game_steps, [0, 0, 0])  # arena 2's clock restarted, 0-1 not stepped
    finally:
        env.close()
