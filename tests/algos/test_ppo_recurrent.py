"""Recurrent PPO: sequence layout, state reset exactly at episode starts, collection/training agreement,
and a memory task that a feed-forward policy cannot solve."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from speedflip.algos.ppo_learner import PPOLearner
from speedflip.algos.ppo_recurrent import SequenceRollout
from speedflip.config import Config, apply_overrides, build_config, load_preset
from speedflip.gym.evaluate import run_episodes
from speedflip.gym.run import GymSession
from speedflip.models.recurrent import RecurrentActorCritic


class CueMemory(gym.Env[np.ndarray, np.int64]):
    """The cue (-1 or +1) is shown only in the first observation; after ``delay`` blank steps a query
    flag appears and the action at that step must name the cue: +1 if right, -1 if wrong.

    A feed-forward policy sees the same query observation whatever the cue: expected return 0 at best.
    """

    def __init__(self, delay: int = 2) -> None:
        self.delay = delay
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.cue, self.t = 0, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.cue, self.t = int(self.np_random.integers(2)), 0
        return np.array([2.0 * self.cue - 1.0, 0.0], np.float32), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        if self.t > self.delay:  # the answer
            return np.zeros(2, np.float32), 1.0 if int(action) == self.cue else -1.0, True, False, {}
        return np.array([0.0, 1.0 if self.t == self.delay else 0.0], np.float32), 0.0, False, False, {}


if "SfCueMemory-v0" not in gym.registry:
    gym.register(id="SfCueMemory-v0", entry_point=CueMemory)


def _config(algo: str, *extra: str) -> Config:
    data = apply_overrides(load_preset("cartpole-ppo"), [
        "gym.env_id=SfCueMemory-v0", f"algo={algo}", "gym.num_envs=8", "ppo.num_steps=16", "ppo.minibatch_size=64",
        "ppo.update_epochs=4", "ppo.learning_rate=0.003", "ppo.anneal_lr=false", "ppo.gamma=0.9",
        "ppo.gae_lambda=0.95", "ppo.ent_coef=0.01", "recurrent.sequence_length=8", "recurrent.hidden_size=32",
        "recurrent.encoder_layers=[32]", "gym.solved_return=null", "gym.random_return=null", "gym.success=auto",
        "run.device=cpu", "run.torch_threads=1", "run.tensorboard=false", *extra,
    ])  # fmt: skip
    return build_config(data)


# ---------------------------------------------------------------------- layout
def test_sequences_layout_by_hand() -> None:
    T, N, L = 4, 2, 2
    t_idx, n_idx = np.meshgrid(np.arange(T), np.arange(N), indexing="ij")
    code = torch.tensor(10 * t_idx + n_idx, dtype=torch.float32)  # [T, N]: 10 t + n
    states = torch.tensor([[[[100.0 * k + n] for n in range(N)]] for k in range(T // L)])  # [K, 1, N, 1]
    rollout = SequenceRollout(code[..., None], code.long(), code, code, code, code, code > 25, states)
    seqs = rollout.sequences(L)
    # sequence s = k * N + n holds steps 2k, 2k+1 of env n
    assert seqs.obs[..., 0].T.tolist() == [[0, 10], [1, 11], [20, 30], [21, 31]]
    assert seqs.states[0, :, 0].tolist() == [0, 1, 100, 101]
    assert seqs.starts.T.tolist() == [[False, False], [False, False], [False, True], [False, True]]
    with pytest.raises(ValueError, match="multiple"):
        rollout.sequences(3)


# ---------------------------------------------------------------------- resets
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_state_is_zeroed_exactly_at_episode_starts(cell: str) -> None:
    torch.manual_seed(0)
    model = RecurrentActorCritic(3, 2, cell, hidden_size=8, num_layers=2, encoder_layers=[8])
    L, B = 6, 2
    obs = torch.randn(L, B, 3)
    state = torch.randn(2, B, model.state_size)  # a non-zero state carried in
    starts = torch.zeros(L, B, dtype=torch.bool)
    starts[3, 0] = True  # env 0: a new episode at step 3; env 1: one episode throughout
    out, _ = model.forward_sequence(obs, state, starts)

    zero = model.initial_state(1)
    fresh, _ = model.forward_sequence(obs[3:, 0:1], zero, torch.zeros(L - 3, 1, dtype=torch.bool))
    torch.testing.assert_close(out[3:, 0:1], fresh)  # env 0 after its reset = a fresh start, exactly
    carried, _ = model.forward_sequence(obs[:, 1:2], state[:, 1:2], torch.zeros(L, 1, dtype=torch.bool))
    torch.testing.assert_close(out[:, 1:2], carried)  # env 1 never reset: the state is carried
    not_reset, _ = model.forward_sequence(obs[3:, 1:2], zero, torch.zeros(L - 3, 1, dtype=torch.bool))
    assert not torch.allclose(out[3:, 1:2], not_reset)  # ...so it differs from a fresh start
    before, _ = model.forward_sequence(obs[:3, 0:1], state[:, 0:1], torch.zeros(3, 1, dtype=torch.bool))
    torch.testing.assert_close(out[:3, 0:1], before)  # and env 0 before its reset used the carried state


def test_collection_and_training_see_the_same_policy() -> None:
    """Replaying the stored sequences from their stored states reproduces the collected log-probs and values."""
    session = GymSession(_config("ppo_recurrent", "recurrent.cell=gru"))
    try:
        learner = session.learner
        assert isinstance(learner, PPOLearner) and learner.recurrent
        rollout = learner.prepare(session.collector.collect(learner.policy_weights()))
        assert isinstance(rollout, SequenceRollout)
        assert rollout.starts[0].all()  # every env starts an episode at the first step
        # CueMemory episodes last 3 steps: a start every 3 steps in every env
        assert rollout.starts[:, 0].tolist() == [t % 3 == 0 for t in range(16)]
        seqs = rollout.sequences(8)
        with torch.no_grad():
            log_probs, _, values = learner.model.evaluate(seqs.obs, seqs.actions, seqs.states, seqs.starts)
        torch.testing.assert_close(log_probs, seqs.log_probs, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(values, seqs.values, atol=1e-5, rtol=1e-5)
    finally:
        session.close()


# ---------------------------------------------------------------------- memory
def _train_and_score(cfg: Config) -> float:
    learner = GymSession(cfg)
    try:
        while learner.global_step < cfg.run.total_steps:
            learner.iterate()
        result = run_episodes("SfCueMemory-v0", {}, learner.policy(), 64, 8, seed=99, deterministic=True)
        return float(np.mean(result.returns))
    finally:
        learner.close()


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_recurrent_policy_solves_the_cue_memory_task(cell: str) -> None:
    assert _train_and_score(_config("ppo_recurrent", f"recurrent.cell={cell}", "run.total_steps=5120")) >= 0.9


def test_feed_forward_policy_cannot_solve_it() -> None:
    probe = GymSession(_config("ppo", "run.total_steps=128"))
    assert isinstance(probe.learner, PPOLearner) and not probe.learner.recurrent
    probe.close()
    assert _train_and_score(_config("ppo", "run.total_steps=5120")) <= 0.5
