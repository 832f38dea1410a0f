"""Collection's inference: the policy alone per step, the critic in one chunked pass after the rollout.

What must hold: ``values[t, n]`` is V of the observation row ``n`` acted on at step ``t`` (not the next
one), ``last_values`` is V of the observation after the last step, both as a per-step forward of the
critic gives them (float32 rounding apart), however the pass is cut into chunks; and the per-step
sampling (``ActorCritic.sample``, ``CategoricalHead.sample_log_prob``) draws the actions ``act`` and the
distribution objects draw, with their log-probabilities.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_collect_rollout_conformance import conformance_config, make_collector

from speedflip._types import Array
from speedflip.algos.normalize import RunningMeanStd
from speedflip.collect import arena_collector
from speedflip.collect.arena_collector import ArenaCollector
from speedflip.models.build import build_policy_model
from speedflip.models.heads import CategoricalHead, draw_categorical
from speedflip.models.mlp import ActorCritic
from speedflip.rollout import PolicyWeights, Rollout


def collect_one(chunk_rows: int, monkeypatch: pytest.MonkeyPatch) -> tuple[Rollout, ActorCritic, Array]:
    """One 32-step rollout of 4 arenas with fixed weights; the model and the normalized observation after it."""
    monkeypatch.setattr(arena_collector, "VALUE_CHUNK_ROWS", chunk_rows)
    collector = make_collector(conformance_config("inprocess", normalize_obs=True))
    try:
        env = collector.env
        torch.manual_seed(7)
        model = build_policy_model(collector.cfg, env.obs_dim, env.num_actions)
        assert isinstance(model, ActorCritic)
        rng = np.random.default_rng(1)
        rms = RunningMeanStd((env.obs_dim,))
        stats = {"mean": rng.normal(0.0, 0.1, env.obs_dim), "var": rng.uniform(0.5, 2.0, env.obs_dim)}
        rms.load_state_dict({**stats, "count": np.array(1e3)})
        weights = PolicyWeights(0, {k: v.clone() for k, v in model.state_dict().items()}, rms.state_dict())
        torch.manual_seed(99)
        rollout = collector.collect(weights)
        last_obs = rms.normalize(collector.obs[collector.learner_rows])  # what the next rollout acts on first
        return rollout, model, last_obs
    finally:
        collector.close()


@pytest.mark.parametrize("chunk_rows", [8192, 7])  # one pass; chunks that do not divide the 32 x 8 rows
def test_values_are_the_critic_of_each_acted_observation(chunk_rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rollout, model, last_obs = collect_one(chunk_rows, monkeypatch)
    T, N = rollout.values.shape
    assert (T, N) == (32, 8)
    with torch.no_grad():
        per_step = np.stack([model.value(torch.as_tensor(rollout.obs[t])).numpy() for t in range(T)])
        last = model.value(torch.as_tensor(last_obs)).numpy()
    assert np.abs(per_step).max() > 1e-3, "an untrained critic with output gain 1 is not near zero"
    np.testing.assert_allclose(rollout.values, per_step, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rollout.last_values, last, rtol=1e-5, atol=1e-6)
    # one step off (the observation after the step instead of the one acted on) would not match
    assert not np.allclose(rollout.values[1:], per_step[:-1], rtol=1e-5, atol=1e-6)
    assert rollout.truncated.any(), "the rollout should cover truncation bootstraps"
    rows = np.nonzero(rollout.truncated)
    assert np.all(rollout.truncation_values[rows] != 0.0)


def test_sample_draws_the_same_actions_as_act() -> None:
    torch.manual_seed(3)
    model = ActorCritic(10, 6, [16], [16])
    obs = torch.randn(64, 10)
    torch.manual_seed(11)
    actions_act, log_probs_act, _ = model.act(obs)
    torch.manual_seed(11)
    actions_sample, log_probs_sample = model.sample(obs)
    assert torch.equal(actions_act, actions_sample)
    assert torch.equal(log_probs_act, log_probs_sample)


@pytest.mark.parametrize("masked", [False, True])
def test_categorical_sample_log_prob_matches_the_distribution(masked: bool) -> None:
    torch.manual_seed(5)
    head = CategoricalHead(12)
    logits = 3.0 * torch.randn(4096, 12)
    mask = torch.rand(4096, 12) > 0.3 if masked else None
    if mask is not None:
        mask[:, 0] = True  # at least one allowed action per row
    torch.manual_seed(8)
    actions, log_prob = head.sample_log_prob(logits, mask, deterministic=False)
    torch.manual_seed(8)
    reference = head.sample(logits, mask, deterministic=False)
    assert torch.equal(actions, reference)  # the same generator draws on the same probabilities
    expected, _ = head.log_prob_entropy(logits, actions, mask)
    torch.testing.assert_close(log_prob, expected)
    if mask is not None:
        assert mask.gather(-1, actions.unsqueeze(-1)).all(), "a masked action was sampled"
    greedy, _ = head.sample_log_prob(logits, mask, deterministic=True)
    assert torch.equal(greedy, head.sample(logits, mask, deterministic=True))


def test_draw_categorical_draws_every_row_with_its_probability_and_never_a_zero_one() -> None:
    torch.manual_seed(0)
    probs = torch.tensor([0.0, 0.2, 0.0, 0.5, 0.3]).expand(200_000, 5).contiguous()
    actions = draw_categorical(probs)
    frequency = torch.bincount(actions, minlength=5).double() / actions.numel()
    assert frequency[0] == 0 and frequency[2] == 0  # the first and a middle row of zero probability
    # 200,000 draws: the standard error of a frequency is at most 0.0011
    torch.testing.assert_close(frequency, probs[0].double(), atol=0.005, rtol=0)
    last = draw_categorical(torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]))
    assert last.tolist() == [2, 0]


def test_the_critic_pass_runs_with_value_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = conformance_config("inprocess", normalize_obs=False)
    collector = ArenaCollector(
        cfg, 0, lambda d, a: build_policy_model(cfg, d, a), torch.device("cpu"), None, value_threads=2
    )
    try:
        seen: list[tuple[int, int]] = []  # (rows, torch threads) of every critic call
        value = collector.model.value

        def spy(obs: torch.Tensor) -> torch.Tensor:
            seen.append((obs.shape[0], torch.get_num_threads()))
            return value(obs)

        monkeypatch.setattr(collector.model, "value", spy)
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            collector.collect(PolicyWeights(0, {k: v.clone() for k, v in collector.model.state_dict().items()}, None))
            assert torch.get_num_threads() == 1, "collection's own thread count is restored"
        finally:
            torch.set_num_threads(before)
        # truncation bootstraps during the rollout keep collection's count; then the pass: 32 x 8 rows, the 8 last
        assert seen[-2:] == [(256, 2), (8, 2)], seen
        assert len(seen) > 2 and all(threads == 1 for _, threads in seen[:-2]), seen
    finally:
        collector.close()
