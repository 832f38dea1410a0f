"""Gymnasium runs end to end through the CLI: run dir layout, best/, resume, eval JSON, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from gym_helpers import gym_config

from speedflip.checkpoint import list_checkpoints, save_checkpoint, verify_checkpoint
from speedflip.cli import main
from speedflip.gym.agents import DQNLearner
from speedflip.gym.cli import resolve_train_config

FAST = ["--set", "run.device=cpu", "--set", "run.torch_threads=1", "--set", "gym.eval_episodes=4"]


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_ppo_run_layout_best_resume_and_eval(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "cp"
    args = ["train", "--preset", "cartpole-ppo", "--run-dir", str(run), *FAST,
            "--set", "gym.eval_interval_steps=512", "--set", "run.checkpoint_interval_steps=512"]  # fmt: skip
    assert main([*args, "--set", "run.total_steps=1024"]) == 0
    assert (run / "config.yaml").is_file() and (run / "tb").is_dir()
    assert [p.name for p in list_checkpoints(run / "checkpoints")] == ["1024", "512"]
    best = verify_checkpoint(run / "checkpoints" / "best")
    records = _records(run)
    assert [r["global_step"] for r in records] == [256 * i for i in range(1, 5)]
    evals = [r["eval/mean_return"] for r in records if "eval/mean_return" in r]
    assert len(evals) == 2 and best["eval"]["mean_return"] == max(evals)
    assert best["compat"]["env_id"] == "CartPole-v1" and best["algo"] == "ppo"

    # same command, larger budget: resumes at 1024 and continues the step counter
    capsys.readouterr()
    assert main([*args, "--set", "run.total_steps=1536"]) == 0
    out = capsys.readouterr().out
    assert "fresh start" not in out and "Stopped (budget reached) at 1,536" in out
    assert [r["global_step"] for r in _records(run)][4:] == [1280, 1536]
    assert "1536" in [p.name for p in list_checkpoints(run / "checkpoints")]

    report = tmp_path / "eval.json"
    assert main(["eval", str(run), "--episodes", "5", "--json", str(report)]) == 0
    data = json.loads(report.read_text())
    for key in ("mean_return", "std_return", "mean_length", "success_rate", "verdict", "min_return", "max_return"):
        assert key in data
    assert data["episodes"] == 5 and len(data["returns"]) == 5
    assert data["mean_return"] == pytest.approx(np.mean(data["returns"]))
    assert data["checkpoint"].endswith("best")


def test_eval_of_a_checkpoint_folder_and_two_players_refused(tmp_path: Path) -> None:
    run = tmp_path / "cp"
    assert main(["train", "--preset", "cartpole-ppo", "--run-dir", str(run), *FAST,
                 "--set", "run.total_steps=256", "--set", "gym.eval_interval_steps=0"]) == 0  # fmt: skip
    assert not (run / "checkpoints" / "best").exists()  # evaluation off: no best/
    report = tmp_path / "e.json"
    assert main(["eval", str(run / "checkpoints" / "256"), "--episodes", "3", "--stochastic",
                 "--json", str(report)]) == 0  # fmt: skip
    assert json.loads(report.read_text())["deterministic"] is False
    assert main(["eval", str(run), "rule"]) == 2


def test_recurrent_and_dqn_runs_through_the_cli(tmp_path: Path) -> None:
    for algo, steps in (("ppo_recurrent", "512"), ("dqn", "1200")):
        run = tmp_path / algo
        argv = ["train", "--env", "gym:CartPole-v1", "--algo", algo, "--run-dir", str(run), *FAST,
                "--set", f"run.total_steps={steps}", "--set", "gym.eval_interval_steps=500",
                "--set", "dqn.learning_starts=500"]  # fmt: skip
        assert main(argv) == 0
        assert verify_checkpoint(run / "checkpoints" / "best")["algo"] == algo
        assert main(["eval", str(run), "--episodes", "2"]) == 0


def test_resuming_with_another_algorithm_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "cp"
    base = ["train", "--env", "gym:CartPole-v1", "--run-dir", str(run), *FAST, "--set", "run.total_steps=256"]
    assert main([*base, "--algo", "ppo"]) == 0
    capsys.readouterr()
    assert main([*base, "--algo", "dqn"]) == 2
    err = capsys.readouterr().err.replace("\n", "")
    assert "different setup" in err and "algo" in err


def test_dqn_on_continuous_actions_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--env", "gym:Pendulum-v1", "--algo", "dqn", "--run-dir", str(tmp_path / "p")]) == 2
    assert "needs a discrete action space" in capsys.readouterr().err.replace("\n", "")
    assert not (tmp_path / "p").exists()  # refused before the run dir is created


def test_env_flag_without_preset_uses_classic_defaults_and_the_new_env_task() -> None:
    cfg, run_dir, notes = resolve_train_config(None, None, [], "gym:Acrobot-v1", "dqn")
    assert cfg.gym.env_id == "Acrobot-v1" and cfg.algo == "dqn"
    assert cfg.gym.success == "auto" and cfg.gym.solved_return is None  # CartPole's task keys dropped
    assert cfg.dqn.q_layers == [256, 256]  # from cartpole-dqn
    assert run_dir == "runs/Acrobot-v1-dqn" and "cartpole-dqn" in notes[0]
    cfg, run_dir, _ = resolve_train_config("cartpole-ppo", None, ["gym.num_envs=16"], None, None)
    assert cfg.gym.success == "truncated" and cfg.gym.num_envs == 16 and run_dir == "runs/cartpole-ppo"


def test_dqn_checkpoint_restores_replay_epsilon_and_target(tmp_path: Path) -> None:
    cfg = gym_config("cartpole-dqn", "run.total_steps=4000", "dqn.learning_starts=200", "dqn.train_frequency=64",
                     "dqn.gradient_steps=4", "dqn.target_update_interval=100", "dqn.tau=0.5",
                     "dqn.exploration_fraction=0.3", "dqn.end_epsilon=0.05")  # fmt: skip
    a = DQNLearner(cfg)
    while a.global_step < 600:
        a.step()
    path = save_checkpoint(tmp_path, a.global_step, a.to_checkpoint(), keep=2)
    meta = verify_checkpoint(path)
    assert meta["replay_pos"] == 600 and meta["replay_size"] == 600 and meta["epsilon"] == pytest.approx(a.epsilon)
    b = DQNLearner(cfg)
    b.load(path)
    assert (b.global_step, b.replay.pos, len(b.replay), b.since_train, b.since_target) == (
        600, 600, 600, a.since_train, a.since_target,
    )  # fmt: skip
    assert b.epsilon == pytest.approx(1.0 - 0.95 * 600 / 1200)  # 30% of 4000 steps
    np.testing.assert_array_equal(b.replay.obs[:600], a.replay.obs[:600])
    np.testing.assert_array_equal(b.replay.next_obs[:600], a.replay.next_obs[:600])
    for key, value in a.target.state_dict().items():
        assert torch.equal(b.target.state_dict()[key], value)
    assert b.gradient_steps_done == a.gradient_steps_done > 0
    a.close()
    b.close()

    no_replay = gym_config("cartpole-dqn", "dqn.save_replay=false", "dqn.learning_starts=200")
    c = DQNLearner(no_replay)
    for _ in range(10):
        c.step()
    path = save_checkpoint(tmp_path / "nr", c.global_step, c.to_checkpoint(), keep=2)
    assert verify_checkpoint(path)["replay_saved"] is False
    d = DQNLearner(no_replay)
    d.load(path)
    assert len(d.replay) == 0 and d.replay.pos == 0 and d.global_step == 40
    c.close()
    d.close()


def test_lunarlander_preset_runs_when_box2d_is_installed(tmp_path: Path) -> None:
    pytest.importorskip("Box2D", reason="the box2d extra is not installed")
    pytest.importorskip("pygame", reason="the box2d extra is not installed")
    cfg, _, _ = resolve_train_config("lunarlander-ppo", None, [], None, None)
    assert cfg.gym.env_id == "LunarLander-v3" and cfg.gym.success == "return" and cfg.gym.solved_return == 200
    run = tmp_path / "ll"
    small = ["gym.num_envs=2", "ppo.num_steps=128", "run.total_steps=256", "gym.eval_interval_steps=0"]
    sets = [arg for key in small for arg in ("--set", key)]
    assert main(["train", "--preset", "lunarlander-ppo", "--run-dir", str(run), *FAST, *sets]) == 0
    assert (run / "checkpoints" / "256").is_dir()


def test_one_argument_eval_of_a_rocket_league_player_plays_the_rule_bot(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import speedflip.selfplay.evaluate as rl_eval

    calls: list[tuple[str, str]] = []

    def fake_run_eval(a: str, b: str, *rest: object) -> int:
        calls.append((a, b))
        return 0

    monkeypatch.setattr(rl_eval, "run_eval", fake_run_eval)
    assert main(["eval", "random"]) == 0
    assert main(["eval", "random", "idle"]) == 0
    assert calls == [("random", "rule"), ("random", "idle")]
    assert "plays the rule bot" in capsys.readouterr().out


def test_recurrent_checkpoint_restores_weights_and_restarts_memory(tmp_path: Path) -> None:
    from speedflip.gym.agents import RecurrentPPOLearner

    cfg = gym_config("cartpole-ppo", "algo=ppo_recurrent", "ppo.normalize_obs=true", "recurrent.cell=gru")
    a = RecurrentPPOLearner(cfg)
    a.iterate()
    assert a.state.abs().sum() > 0  # memory carried between rollouts
    path = save_checkpoint(tmp_path, a.global_step, a.to_checkpoint(), keep=2)
    assert verify_checkpoint(path)["compat"]["network"] == {
        "cell": "gru", "hidden_size": 64, "num_layers": 1, "encoder_layers": [64], "head_layers": [64],
        "activation": "tanh",
    }  # fmt: skip
    b = RecurrentPPOLearner(cfg)
    b.load(path)
    for key, value in a.model.state_dict().items():
        assert torch.equal(b.model.state_dict()[key], value)
    np.testing.assert_array_equal(b.obs_rms.mean, a.obs_rms.mean)
    assert (b.global_step, b.iteration) == (a.global_step, a.iteration) == (256, 1)
    assert b.state.abs().sum() == 0 and b.starts.all()  # fresh episodes after a resume: fresh memory
    a.close()
    b.close()
