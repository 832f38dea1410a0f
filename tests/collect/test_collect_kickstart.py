"""Kickstarting (ppo.kickstart_coef): the collector labels every learner state with the rule bot's row, the
learner's cross-entropy toward those rows falls when it trains on them, and worker processes label as the
in-process arenas do (they publish the arena state to shared memory)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from speedflip.algos.ppo import Batch
from speedflip.algos.ppo_learner import PPOLearner
from speedflip.collect import choose_collector
from speedflip.collect.arena_collector import ArenaCollector
from speedflip.config import Config, build_config
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.models.build import PolicyModel, build_policy_model
from speedflip.selfplay.rule_policy import RulePolicy


def kickstart_config(coef: float = 1.0, collector: str = "inprocess", opponent_share: float = 0.0) -> Config:
    return build_config(
        {
            "env": {"num_arenas": 2, "blue_size": 1, "orange_size": 1, "state_setters": {"kickoff": 1.0}},
            "ppo": {
                "num_steps": 16, "minibatch_size": 16, "update_epochs": 4, "learning_rate": 3e-3,
                "policy_layers": [32], "critic_layers": [32], "kickstart_coef": coef, "kickstart_steps": 1000,
            },
            "selfplay": {"opponent_share": opponent_share},
            "run": {"seed": 3, "device": "cpu", "collector": collector, "num_threads": 1, "torch_threads": 1},
        }
    )  # fmt: skip


def make_collector(cfg: Config) -> ArenaCollector:
    def factory(obs_dim: int, num_actions: int) -> PolicyModel:
        return build_policy_model(cfg, obs_dim, num_actions)

    return ArenaCollector(cfg, 0, factory, torch.device("cpu"), None)


def test_every_learner_state_gets_the_rule_bots_row_until_the_decay_ends() -> None:
    cfg = kickstart_config()
    collector = make_collector(cfg)
    try:
        learner = PPOLearner(cfg, build_policy_model(cfg, collector.env.obs_dim, collector.env.num_actions),
                             torch.device("cpu"), collector.env.obs_dim)  # fmt: skip
        assert isinstance(collector.env, RocketLeagueVecEnv)
        rule = RulePolicy(collector.env.actions.table)
        first = rule.act(collector.env.state, collector.car_teams)[collector.learner_rows]
        rollout = collector.collect(learner.policy_weights(), global_step=0)
        assert rollout.teacher_actions is not None
        assert rollout.teacher_actions.shape == rollout.actions.shape == (16, 4)
        np.testing.assert_array_equal(rollout.teacher_actions[0], first)  # the state the first step acted on
        assert len(np.unique(rollout.teacher_actions)) > 1  # steering, boosting: not one constant row
        batch = learner.prepare(rollout)
        assert isinstance(batch, Batch) and batch.teacher_actions is not None
        np.testing.assert_array_equal(batch.teacher_actions.numpy(), rollout.teacher_actions.reshape(-1))
        assert collector.collect(learner.policy_weights(), global_step=1000).teacher_actions is None  # weight 0
    finally:
        collector.close()


def test_the_rule_bot_stops_labelling_when_the_clock_ends_the_kickstart() -> None:
    """ppo.kickstart_fraction: 1,000 steps or half of a 1-minute budget, whichever first; at step 10 the
    steps say 1 % and 30 s of training say the end."""
    cfg = kickstart_config().model_copy(deep=True)
    cfg.ppo.kickstart_fraction = 0.5
    cfg.run.time_budget_minutes = 1.0
    collector = make_collector(cfg)
    try:
        model = build_policy_model(cfg, collector.env.obs_dim, collector.env.num_actions)
        weights = PPOLearner(cfg, model, torch.device("cpu"), collector.env.obs_dim).policy_weights()
        assert collector.collect(weights, global_step=10, train_seconds=29.0).teacher_actions is not None
        assert collector.collect(weights, global_step=10, train_seconds=30.0).teacher_actions is None
    finally:
        collector.close()


def test_pool_arenas_ask_the_rule_bot_once_per_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the kickstart on, the rule bot's rows label the learner and drive the pool's rule-bot opponents
    from one call per step (it used to be asked twice: once to label, once to play)."""
    calls: list[np.ndarray] = []
    original = RulePolicy.act

    def counting_act(self: RulePolicy, state: object, car_teams: np.ndarray) -> np.ndarray:
        out = original(self, state, car_teams)  # type: ignore[arg-type]
        calls.append(out.copy())
        return out

    monkeypatch.setattr(RulePolicy, "act", counting_act)
    cfg = kickstart_config(opponent_share=1.0)  # both arenas play the pool, which holds only the rule bot
    collector = make_collector(cfg)
    try:
        assert isinstance(collector.env, RocketLeagueVecEnv)
        stepped: list[np.ndarray] = []
        env_step = collector.env.step

        def recording_step(actions: np.ndarray, *rest: object) -> object:
            stepped.append(actions.copy())
            return env_step(actions, *rest)  # type: ignore[arg-type]

        monkeypatch.setattr(collector.env, "step", recording_step)
        model = build_policy_model(cfg, collector.env.obs_dim, collector.env.num_actions)
        learner = PPOLearner(cfg, model, torch.device("cpu"), collector.env.obs_dim)
        rollout = collector.collect(learner.policy_weights(), global_step=0)
        assert collector.matchmaker.pool_arenas == 2 and rollout.actions.shape == (16, 2)  # one learner car per arena
        assert len(calls) == len(stepped) == 16  # once per step, not twice
        opponents = ~collector.matchmaker.learner_rows  # a mask over all cars (collector.learner_rows: indices)
        for rule_rows, actions in zip(calls, stepped, strict=True):
            np.testing.assert_array_equal(actions[opponents], rule_rows[opponents])  # the rule bot drives them
        np.testing.assert_array_equal(rollout.teacher_actions, np.stack(calls)[:, collector.learner_rows])
    finally:
        collector.close()


def _cross_entropy_after_updates(coef: float) -> tuple[float, float]:
    """The policy's mean -log pi(rule bot's row) on one rollout before and after 3 updates on it."""
    cfg = kickstart_config(coef=1.0)  # the collector labels the states either way
    collector = make_collector(cfg)
    try:
        torch.manual_seed(0)
        model = build_policy_model(cfg, collector.env.obs_dim, collector.env.num_actions)
        learner = PPOLearner(cfg, model, torch.device("cpu"), collector.env.obs_dim)
        batch = learner.prepare(collector.collect(learner.policy_weights(), global_step=0))
        assert isinstance(batch, Batch) and batch.teacher_actions is not None

        def cross_entropy() -> float:
            with torch.no_grad():
                return float(-model.evaluate(batch.obs, batch.teacher_actions)[0].mean())

        before = cross_entropy()
        for _ in range(3):
            learner.set_hyperparameters(3e-3, 0.0, kickstart_coef=coef)
            learner.update(batch)
        return before, cross_entropy()
    finally:
        collector.close()


def test_training_with_the_weight_moves_the_policy_to_the_rule_bot() -> None:
    before, after = _cross_entropy_after_updates(coef=1.0)
    assert before == pytest.approx(np.log(90), abs=0.05)  # a fresh policy is near uniform over 90 rows
    assert after < before - 0.5
    plain_before, plain_after = _cross_entropy_after_updates(coef=0.0)
    assert plain_before == pytest.approx(before)  # same seed, same start
    assert abs(plain_after - plain_before) < 0.2  # plain PPO does not go there by itself


def test_worker_processes_label_and_play_the_rule_bot_as_in_process() -> None:
    """The workers publish the arenas' state to shared memory, so the rule bot's labels (the kickstart) and its
    moves in a pool arena come out the same as in process, step for step (same seed, same weights)."""
    rollouts = []
    for backend in ("inprocess", "multiprocess"):
        cfg = kickstart_config(collector=backend, opponent_share=0.5)
        assert choose_collector(cfg, cores=2).backend == backend
        collector = make_collector(cfg)
        try:
            torch.manual_seed(0)
            model = build_policy_model(cfg, collector.env.obs_dim, collector.env.num_actions)
            learner = PPOLearner(cfg, model, torch.device("cpu"), collector.env.obs_dim)
            rollouts.append(collector.collect(learner.policy_weights(), global_step=0))
        finally:
            collector.close()
    inproc, workers = rollouts
    assert inproc.teacher_actions is not None and workers.teacher_actions is not None
    np.testing.assert_array_equal(workers.teacher_actions, inproc.teacher_actions)
    np.testing.assert_array_equal(workers.actions, inproc.actions)
    np.testing.assert_array_equal(workers.raw_obs, inproc.raw_obs)  # the rule bot's car moved alike
    assert inproc.teacher_actions.shape == (16, 3)  # 2 learner cars in the self-play arena, 1 in the pool arena
