"""``speedflip export RUN@lastN``: the last milestones of a run exported as one bot (the mean of their action
probabilities), checked against the ensemble speedflip plays in matches."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from speedflip.cli import main
from speedflip.config import build_config
from speedflip.env.arenas import GameArrays
from speedflip.export.exporter import read_source
from speedflip.export.parity import load_bundle, record_match, replay_through_bot
from speedflip.selfplay.evaluate import shipped_note
from speedflip.selfplay.policies import EnsemblePolicy, NeuralPolicy, resolve_policy
from speedflip.train.trainer import Trainer


@pytest.fixture(scope="module")
def run_with_milestones(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny 1v1 run with three milestones, one after each of three PPO updates (three different networks), that
    ships them as one bot (``selfplay.ship_ensemble: 3``)."""
    run = tmp_path_factory.mktemp("export-runs") / "tinyens"
    cfg = build_config(
        {
            "env": {"num_arenas": 2, "blue_size": 1, "orange_size": 1},
            "ppo": {"num_steps": 8, "minibatch_size": 16, "policy_layers": [32, 32], "critic_layers": [16],
                    "learning_rate": 0.01},
            "selfplay": {"ship_ensemble": 3},
            "run": {"seed": 5, "device": "cpu", "collector": "inprocess", "num_threads": 1, "torch_threads": 1,
                    "tensorboard": False},
        }
    )  # fmt: skip
    trainer = Trainer(cfg)
    try:
        for _ in range(3):
            batch, raw_obs, _ = trainer.collect()
            trainer.update(batch, raw_obs)
            trainer.save(run / "milestones" / "main")
        trainer.save(run / "checkpoints")
    finally:
        trainer.close()
    return run


@pytest.fixture(scope="module")
def ensemble_bot(run_with_milestones: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bots") / "ensbot"
    assert main(["export", f"{run_with_milestones}@last3", "--rlbot", str(out)]) == 0
    return out


def test_ensemble_bot_holds_every_member(run_with_milestones: Path, ensemble_bot: Path) -> None:
    settings = json.loads((ensemble_bot / "speedflip_bot.json").read_text())
    steps = sorted(int(p.name) for p in (run_with_milestones / "milestones" / "main").iterdir())
    assert settings["ensemble_members"] == 3
    assert [int(Path(p).name) for p in settings["member_checkpoints"]] == steps  # oldest first
    agent = load_bundle(ensemble_bot).agent.SpeedflipAgent(ensemble_bot, backend="numpy")
    assert len(agent.policies) == 3
    first, last = agent.policies[0].weights[0], agent.policies[-1].weights[0]
    assert not np.array_equal(first, last)  # three different networks, not one copied


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_ensemble_bot_plays_as_speedflip_plays_it(run_with_milestones: Path, ensemble_bot: Path, backend: str) -> None:
    src = read_source(f"{run_with_milestones}@last3")
    assert len(src.checkpoints) == 3
    recording = record_match(src.checkpoints, src.obs_options, 1, steps=150, arenas=2, episode_seconds=4.0, seed=3)
    result = replay_through_bot(ensemble_bot, recording, backend=backend)
    assert result.obs_mismatches == 0 and result.action_mismatches == 0, result.summary()
    # and the ensemble is not just its newest member: somewhere they choose differently
    newest = record_match(src.checkpoint, src.obs_options, 1, steps=150, arenas=2, episode_seconds=4.0, seed=3)
    assert not np.array_equal(newest.actions, recording.actions)


def test_ensemble_bot_logits_are_the_log_of_the_mean_probabilities(
    run_with_milestones: Path, ensemble_bot: Path
) -> None:
    src = read_source(f"{run_with_milestones}@last3")
    recording = record_match(src.checkpoints, src.obs_options, 1, steps=10, arenas=1, seed=2)
    obs = recording.obs.reshape(-1, recording.obs.shape[-1])
    policy = resolve_policy(
        f"{run_with_milestones}@last3", obs.shape[-1], np.zeros((90, 8)), deterministic=True, own_table=True
    )
    assert isinstance(policy, EnsemblePolicy)
    want = policy.probabilities(obs).numpy()
    agent = load_bundle(ensemble_bot).agent.SpeedflipAgent(ensemble_bot, backend="numpy")
    np.testing.assert_allclose(np.exp(agent.logits(obs)), want, atol=1e-6)
    actions = policy.act(obs, GameArrays.empty(1, 2), np.zeros(2, np.int64))
    assert np.array_equal(actions, want.argmax(-1))


def test_ensemble_torchscript_matches_the_bot(run_with_milestones: Path, ensemble_bot: Path, tmp_path: Path) -> None:
    ts_path = tmp_path / "ens.pt"
    assert main(["export", f"{run_with_milestones}@last3", "--torchscript", str(ts_path)]) == 0
    side = json.loads((tmp_path / "ens.pt.json").read_text())
    assert len(side["member_checkpoints"]) == 3 and "mean action probabilities of 3" in side["output"]
    src = read_source(f"{run_with_milestones}@last3")
    recording = record_match(src.checkpoints, src.obs_options, 1, steps=10, arenas=1, seed=2)
    obs = recording.obs.reshape(-1, recording.obs.shape[-1])
    agent = load_bundle(ensemble_bot).agent.SpeedflipAgent(ensemble_bot, backend="numpy")
    got = torch.jit.load(str(ts_path))(torch.from_numpy(obs)).detach().numpy()
    want = agent.logits(obs)
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert np.array_equal(got.argmax(-1), want.argmax(-1))


def test_too_few_milestones_is_a_clear_error(
    run_with_milestones: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", f"{run_with_milestones}@last5", "--rlbot", str(tmp_path / "bot")]) == 2
    err = " ".join(capsys.readouterr().err.split())  # the console wraps long lines
    assert "3 milestone(s) that verify, not 5" in err and "@last3" in err
    assert not (tmp_path / "bot").exists()


def test_run_dir_ships_its_ensemble(run_with_milestones: Path, tmp_path: Path) -> None:
    run = str(run_with_milestones)
    policy = resolve_policy(run, 103, np.zeros((90, 8)), own_table=True)
    assert isinstance(policy, EnsemblePolicy) and len(policy.members) == 3
    assert "last 3 milestones play as one bot" in (shipped_note(run) or "")
    out = tmp_path / "bot"
    assert main(["export", run, "--rlbot", str(out)]) == 0
    assert json.loads((out / "speedflip_bot.json").read_text())["ensemble_members"] == 3
    # with fewer milestones than it ships, the run dir means its best-rated milestone (none here: the newest checkpoint)
    short = tmp_path / "short"
    shutil.copytree(run_with_milestones, short)
    shutil.rmtree(min((short / "milestones" / "main").iterdir(), key=lambda p: int(p.name)))
    single = resolve_policy(str(short), 103, np.zeros((90, 8)), own_table=True)
    assert isinstance(single, NeuralPolicy) and single.path.parent.name == "checkpoints"
