"""The RLGym v2 adapter: RLGym envs (stock rlgym-rocket-league components) trained through speedflip's trainer.

The factories below are also the ones the tests point the config at (``<this file>:build_env``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rlgym.api import ActionParser, ObsBuilder, RewardFunction, RLGym
from rlgym.rocket_league.action_parsers import LookupTableAction, RepeatAction
from rlgym.rocket_league.api import GameState
from rlgym.rocket_league.done_conditions import AnyCondition, GoalCondition, NoTouchTimeoutCondition, TimeoutCondition
from rlgym.rocket_league.obs_builders import DefaultObs
from rlgym.rocket_league.reward_functions import CombinedReward, GoalReward, TouchReward
from rlgym.rocket_league.sim import RocketSimEngine
from rlgym.rocket_league.state_mutators import FixedTeamSizeMutator, KickoffMutator, MutatorSequence

from speedflip.checkpoint import verify_checkpoint
from speedflip.collect import make_vec_env
from speedflip.config import build_config, resolve_config
from speedflip.env.rlgym_adapter import SLOW_PATH_NOTE, RLGymAdapterError, RLGymVecEnv, load_factory, probe_dims
from speedflip.train.trainer import Trainer

HERE = Path(__file__).resolve()
TICK_SKIP = 8


class SpeedTowardBall(RewardFunction[str, GameState, float]):
    """A simple dense reward: the car's velocity toward the ball, as a fraction of 2300 uu/s."""

    def reset(self, agents: list[str], initial_state: GameState, shared_info: dict[str, Any]) -> None:
        pass

    def get_rewards(
        self,
        agents: list[str],
        state: GameState,
        is_terminated: dict[str, bool],
        is_truncated: dict[str, bool],
        shared_info: dict[str, Any],
    ) -> dict[str, float]:
        out = {}
        for agent in agents:
            car = state.cars[agent].physics
            to_ball = state.ball.position - car.position
            direction = to_ball / max(float(np.linalg.norm(to_ball)), 1e-6)
            out[agent] = float(np.dot(car.linear_velocity, direction) / 2300.0)
        return out


def build_env(blue: int = 1, orange: int = 1, timeout_seconds: float = 20.0) -> RLGym:
    """What an RLGym user writes: DefaultObs + LookupTableAction (tick skip 8) + a simple reward."""
    return RLGym(
        state_mutator=MutatorSequence(FixedTeamSizeMutator(blue_size=blue, orange_size=orange), KickoffMutator()),
        obs_builder=DefaultObs(zero_padding=None),
        action_parser=RepeatAction(LookupTableAction(), repeats=TICK_SKIP),
        reward_fn=CombinedReward((GoalReward(), 10.0), (TouchReward(), 1.0), (SpeedTowardBall(), 0.1)),
        termination_cond=GoalCondition(),
        truncation_cond=AnyCondition(NoTouchTimeoutCondition(10.0), TimeoutCondition(timeout_seconds)),
        transition_engine=RocketSimEngine(),
    )


def build_2v1() -> RLGym:
    return build_env(2, 1)


def build_short() -> RLGym:
    """Episodes truncated after half a second (8 steps of 8 ticks)."""
    return build_env(timeout_seconds=0.5)


def build_not_an_env() -> str:
    return "not an env"


class UnevenObs(ObsBuilder[str, np.ndarray, GameState, tuple[str, int]]):
    """Blue gets 4 numbers, orange 5: the adapter must refuse it."""

    def get_obs_space(self, agent: str) -> tuple[str, int]:
        return "real", -1

    def reset(self, agents: list[str], initial_state: GameState, shared_info: dict[str, Any]) -> None:
        pass

    def build_obs(self, agents: list[str], state: GameState, shared_info: dict[str, Any]) -> dict[str, np.ndarray]:
        return {a: np.zeros(4 + state.cars[a].team_num, np.float32) for a in agents}


class ContinuousParser(ActionParser[str, np.ndarray, np.ndarray, GameState, tuple[str, int]]):
    def get_action_space(self, agent: str) -> tuple[str, int]:
        return "continuous", 8

    def reset(self, agents: list[str], initial_state: GameState, shared_info: dict[str, Any]) -> None:
        pass

    def parse_actions(
        self, actions: dict[str, np.ndarray], state: GameState, shared_info: dict[str, Any]
    ) -> dict[str, np.ndarray]:
        return {a: np.asarray(v, np.float32).reshape(1, 8) for a, v in actions.items()}


def _with(**parts: Any) -> RLGym:
    env = build_env()
    return RLGym(
        state_mutator=env.state_mutator,
        obs_builder=parts.get("obs_builder", env.obs_builder),
        action_parser=parts.get("action_parser", env.action_parser),
        reward_fn=env.reward_fn,
        termination_cond=env.termination_cond,
        truncation_cond=env.truncation_cond,
        transition_engine=env.transition_engine,
    )


def _config(**env: Any) -> Any:
    data: dict[str, Any] = {
        "env": {"num_arenas": 2, "blue_size": 1, "orange_size": 1, "rlgym": f"{HERE}:build_env", **env},
        "ppo": {
            "num_steps": 16,
            "minibatch_size": 32,
            "update_epochs": 2,
            "policy_layers": [16],
            "critic_layers": [16],
        },
        "run": {"seed": 3, "device": "cpu", "collector": "inprocess", "torch_threads": 1, "tensorboard": False},
    }
    return build_config(data)


# ---------------------------------------------------------------------- training through the trainer
def test_trainer_runs_rlgym_env_and_saves_a_checkpoint(tmp_path: Path) -> None:
    cfg = _config()
    trainer = Trainer(cfg, run_dir=tmp_path)
    try:
        env = trainer.env
        assert isinstance(env, RLGymVecEnv)
        assert (env.num_arenas, env.num_cars, env.num_agents) == (2, 2, 4)
        assert env.obs_dim == 52 + 20 * 2  # RLGym's DefaultObs without padding, 1v1
        assert env.num_actions == 90
        assert trainer.obs.shape == (4, env.obs_dim) and trainer.obs.dtype == np.float32
        assert env.describe()["path"] == SLOW_PATH_NOTE
        for _ in range(2):
            batch, raw_obs, stats = trainer.collect()
            assert raw_obs.shape == (16, 4, env.obs_dim)
            assert np.all(np.isfinite(raw_obs))
            metrics = trainer.update(batch, raw_obs)
            assert np.isfinite(metrics["policy_loss"])
            assert stats.steps == 64
        assert trainer.global_step == 128
        assert env.total_agent_seconds == pytest.approx(128 * TICK_SKIP / 120)
        path = trainer.save(tmp_path / "checkpoints")
    finally:
        trainer.close()
    meta = verify_checkpoint(path)
    assert meta["compat"]["obs_dim"] == 92 and meta["compat"]["num_actions"] == 90
    assert meta["numpy_rng"]["format"] == "rlgym-global-v1"
    json.dumps(meta["numpy_rng"])

    resumed = Trainer(cfg, run_dir=tmp_path)
    try:
        resumed.load(path)
        assert resumed.global_step == 128
        resumed.collect()
    finally:
        resumed.close()


def test_yaml_selects_the_adapter(tmp_path: Path) -> None:
    assert probe_dims(f"{HERE}:build_2v1") == (52 + 20 * 3, 90)
    yaml_file = tmp_path / "rlgym.yaml"
    yaml_file.write_text(
        f"env:\n  rlgym: '{HERE}:build_2v1'\n  num_arenas: 1\n  blue_size: 2\n  orange_size: 1\n"
        "ppo:\n  num_steps: 8\n  minibatch_size: 8\n  kickstart_coef: 0\nrun:\n  collector: inprocess\n"
    )
    env = make_vec_env(resolve_config("quick", yaml_file))
    try:
        assert isinstance(env, RLGymVecEnv)
        assert env.car_teams.tolist() == [0, 0, 1]  # blue first, as in the native env
        assert env.agent_ids[0] == ["blue-0", "blue-1", "orange-0"]
        assert env.reset().shape == (3, 52 + 20 * 3)
    finally:
        env.close()


# ---------------------------------------------------------------------- step semantics
def test_episode_end_resets_the_copy_and_reports_it() -> None:
    env = RLGymVecEnv.from_factory(build_short, num_arenas=2, seed=1)
    try:
        obs = env.reset()
        neutral = np.flatnonzero(np.all(env.actions.table == 0, axis=1))
        action = int(neutral[0]) if neutral.size else 0
        for step in range(1, 9):
            result = env.step(np.full(env.num_agents, action))
            if step < 8:
                assert not result.truncated.any() and not result.episodes
                obs = result.obs
        assert result.truncated.all() and not result.terminated.any()
        assert len(result.episodes) == 2
        assert result.episodes[0]["length_seconds"] == pytest.approx(8 * TICK_SKIP / 120)
        assert not np.array_equal(result.final_obs, result.obs)  # final obs of the episode vs the new kickoff
        assert obs.shape == result.obs.shape
    finally:
        env.close()


def test_same_seed_same_rollout_and_rng_state_round_trip() -> None:
    def rollout(seed: int, steps: int = 30) -> np.ndarray:
        env = RLGymVecEnv.from_factory(build_env, num_arenas=2, seed=seed)
        rng = np.random.default_rng(0)
        try:
            out = [env.reset()]
            for _ in range(steps):
                out.append(env.step(rng.integers(0, env.num_actions, env.num_agents)).obs)
            return np.stack(out)
        finally:
            env.close()

    np.testing.assert_array_equal(rollout(5), rollout(5))

    env = RLGymVecEnv.from_factory(build_env, num_arenas=1, seed=9)
    try:
        state = json.loads(json.dumps(env.get_rng_state()))
        first = [env.reset() for _ in range(4)]
        env.set_rng_state(state)
        again = [env.reset() for _ in range(4)]
        np.testing.assert_array_equal(np.stack(first), np.stack(again))
        with pytest.raises(RLGymAdapterError, match="native-env run"):
            env.set_rng_state({"format": "per-arena-v1", "arenas": []})
        with pytest.raises(RLGymAdapterError, match="RewardFunction"):
            env.set_reward_weights({"goal": 1.0})
    finally:
        env.close()


def test_from_env_and_from_components_make_independent_copies() -> None:
    env = RLGymVecEnv.from_env(build_env(), num_arenas=3, seed=0)
    try:
        assert len({id(e.obs_builder) for e in env.envs}) == 3
        assert len({id(e.transition_engine) for e in env.envs}) == 3
        assert env.step(np.zeros(env.num_agents, np.int64)).obs.shape == (6, 92)
    finally:
        env.close()
    proto = build_env()
    env = RLGymVecEnv.from_components(
        2,
        obs_builder=DefaultObs(zero_padding=2),
        action_parser=RepeatAction(LookupTableAction(), repeats=4),
        reward_fn=TouchReward(),
        state_mutator=proto.state_mutator,
        termination_cond=GoalCondition(),
        truncation_cond=TimeoutCondition(5.0),
    )
    try:
        assert env.obs_dim == 52 + 20 * 2 * 2
        assert env.envs[0].obs_builder is not env.envs[1].obs_builder
        env.step(np.zeros(env.num_agents, np.int64))
        assert env.total_agent_seconds == pytest.approx(4 * 4 / 120)
    finally:
        env.close()


# ---------------------------------------------------------------------- what is refused, and how
@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("no_colon_here", "module:function"),
        ("speedflip_no_such_module_xyz:build", r"cannot import module 'speedflip_no_such_module_xyz'.*module:function"),
        ("speedflip.config:no_such_function", "has no function 'no_such_function'"),
        ("/no/such/file.py:build", "does not exist"),
    ],
)
def test_bad_factory_paths_say_what_is_expected(spec: str, match: str) -> None:
    with pytest.raises(RLGymAdapterError, match=match):
        load_factory(spec)


def test_factory_module_found_from_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sf_user_rlgym_mod.py").write_text(
        "from rlgym.api import RLGym\n"
        "from rlgym.rocket_league.action_parsers import LookupTableAction\n"
        "from rlgym.rocket_league.obs_builders import DefaultObs\n"
        "from rlgym.rocket_league.reward_functions import TouchReward\n"
        "from rlgym.rocket_league.sim import RocketSimEngine\n"
        "from rlgym.rocket_league.state_mutators import FixedTeamSizeMutator, KickoffMutator, MutatorSequence\n\n"
        "def build():\n"
        "    return RLGym(state_mutator=MutatorSequence(FixedTeamSizeMutator(), KickoffMutator()), "
        "obs_builder=DefaultObs(), "
        "action_parser=LookupTableAction(), reward_fn=TouchReward(), transition_engine=RocketSimEngine())\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_factory appends the current directory
    env = RLGymVecEnv.from_factory("sf_user_rlgym_mod:build", 1)
    try:
        assert env.obs_dim == 52 + 20 * 3 * 2  # DefaultObs pads to 3v3 by default
        assert "sf_user_rlgym_mod:build" in env.describe()["source"]
    finally:
        env.close()


def test_unusable_envs_are_refused_with_reasons() -> None:
    with pytest.raises(RLGymAdapterError, match=r"expected an rlgym\.api\.RLGym"):
        RLGymVecEnv.from_factory(f"{HERE}:build_not_an_env", 1)
    with pytest.raises(RLGymAdapterError, match="different observation shapes"):
        RLGymVecEnv([_with(obs_builder=UnevenObs())])
    with pytest.raises(RLGymAdapterError, match="discrete policy"):
        RLGymVecEnv([_with(action_parser=ContinuousParser())])
    same = build_env()
    with pytest.raises(RLGymAdapterError, match="own env"):
        RLGymVecEnv([same, same])


def test_config_conflicts_are_refused() -> None:
    with pytest.raises(RLGymAdapterError, match=r"env\.blue_size"):
        make_vec_env(_config(blue_size=2, orange_size=2, num_arenas=1))
    with pytest.raises(RLGymAdapterError, match="multiprocess"):
        make_vec_env(
            _config().model_copy(update={"run": _config().run.model_copy(update={"collector": "multiprocess"})})
        )
    with pytest.raises(RLGymAdapterError, match="action_form"):
        make_vec_env(_config(action_form="continuous"))
    phases = [{"name": "a", "rewards": {"touch": 1.0}}]
    with pytest.raises(RLGymAdapterError, match="reward_phases"):
        make_vec_env(_config(reward_phases=phases))
