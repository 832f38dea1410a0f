"""Gymnasium runs end to end through the CLI: run dir layout, best/, resume, eval JSON, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from gym_helpers import gym_config
from rich.console import Console

from speedflip.algos.dqn_learner import DQNLearner
from speedflip.algos.ppo_learner import PPOLearner
from speedflip.checkpoint import list_checkpoints, save_checkpoint, verify_checkpoint
from speedflip.cli import main
from speedflip.config import Config, load_preset
from speedflip.gym.cli import resolve_train_config
from speedflip.gym.run import GymSession, train_gym
from speedflip.train.rundir import RunDirError, lock_run_dir

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


def _dqn(session: GymSession) -> DQNLearner:
    assert isinstance(session.learner, DQNLearner)
    return session.learner


def test_dqn_checkpoint_restores_replay_epsilon_and_target(tmp_path: Path) -> None:
    cfg = gym_config("cartpole-dqn", "run.total_steps=4000", "dqn.learning_starts=200", "dqn.train_frequency=64",
                     "dqn.gradient_steps=4", "dqn.target_update_interval=100", "dqn.tau=0.5",
                     "dqn.exploration_fraction=0.3", "dqn.end_epsilon=0.05", "gym.log_interval_steps=600")  # fmt: skip
    a = GymSession(cfg)
    a.iterate()
    assert a.global_step == 600
    path = save_checkpoint(tmp_path, a.global_step, a.to_checkpoint(), keep=2)
    meta = verify_checkpoint(path)
    qa = _dqn(a)
    assert meta["replay_pos"] == 600 and meta["replay_size"] == 600 and meta["epsilon"] == pytest.approx(qa.epsilon)
    b = GymSession(cfg)
    b.load(path)
    qb = _dqn(b)
    assert (b.global_step, qb.global_step, qb.replay.pos, len(qb.replay), qb.since_train, qb.since_target) == (
        600, 600, 600, 600, qa.since_train, qa.since_target,
    )  # fmt: skip
    assert qb.epsilon == pytest.approx(1.0 - 0.95 * 600 / 1200)  # 30% of 4000 steps
    np.testing.assert_array_equal(qb.replay.obs[:600], qa.replay.obs[:600])
    np.testing.assert_array_equal(qb.replay.next_obs[:600], qa.replay.next_obs[:600])
    for key, value in qa.target.state_dict().items():
        assert torch.equal(qb.target.state_dict()[key], value)
    assert qb.gradient_steps_done == qa.gradient_steps_done > 0
    assert qb.rng.bit_generator.state == qa.rng.bit_generator.state
    assert b.collector.rng.bit_generator.state == a.collector.rng.bit_generator.state
    a.close()
    b.close()

    no_replay = gym_config("cartpole-dqn", "dqn.save_replay=false", "dqn.learning_starts=200",
                           "gym.log_interval_steps=40")  # fmt: skip
    c = GymSession(no_replay)
    c.iterate()
    path = save_checkpoint(tmp_path / "nr", c.global_step, c.to_checkpoint(), keep=2)
    assert verify_checkpoint(path)["replay_saved"] is False
    d = GymSession(no_replay)
    d.load(path)
    assert len(_dqn(d).replay) == 0 and _dqn(d).replay.pos == 0 and d.global_step == 40
    c.close()
    d.close()


@pytest.mark.parametrize(
    ("preset", "extra"),
    [("cartpole-ppo", ["ppo.normalize_obs=true", "ppo.normalize_rewards=true"]),
     ("cartpole-ppo", ["algo=ppo_recurrent", "recurrent.hidden_size=16"]),
     ("cartpole-dqn", ["dqn.learning_starts=100", "dqn.train_frequency=32", "gym.log_interval_steps=200"])],
)  # fmt: skip
def test_resume_is_bit_for_bit(tmp_path: Path, preset: str, extra: list[str]) -> None:
    """Two sessions resumed from one checkpoint train to the same weights, optimizer state and records."""
    cfg = gym_config(preset, "run.total_steps=2000", *extra)
    a = GymSession(cfg)
    for _ in range(2):
        a.iterate()
    path = save_checkpoint(tmp_path, a.global_step, a.to_checkpoint(), keep=2)
    a.close()
    runs = []
    for _ in range(2):
        b = GymSession(cfg)
        b.load(path)
        records = [b.iterate() for _ in range(2)]
        runs.append((b.learner.state_dict(), [(r["global_step"], r["charts/episode_reward_mean"]) for r in records]))
        b.close()
    (first, records_1), (second, records_2) = runs
    assert records_1 == records_2
    for key, value in first.model.items():
        assert torch.equal(second.model[key], value), key
    for key, value in first.tensors.items():
        if not key.startswith("rng."):
            assert torch.equal(second.tensors[key], value), key


def test_gym_and_rocket_league_runs_go_through_the_one_run_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import speedflip.train.loop as loop
    import speedflip.train.run as rl_run

    assert rl_run.run_loop is loop.run  # the Rocket League entry point's binding of the one loop
    calls: list[tuple[str, dict[str, object]]] = []

    def fake_run(cfg: Config, run_dir: Path, compat: dict[str, object], make_session: object, *rest: object) -> int:
        calls.append((str(cfg.gym.env_id), compat))
        return 0

    monkeypatch.setattr(loop, "run", fake_run)
    monkeypatch.setattr(rl_run, "run_loop", fake_run)
    assert train_gym(gym_config("cartpole-ppo"), tmp_path / "g") == 0
    from speedflip.config import build_config

    assert rl_run.train(build_config(load_preset("quick")), tmp_path / "r") == 0
    assert [env for env, _ in calls] == ["CartPole-v1", "None"]
    assert calls[0][1]["env_id"] == "CartPole-v1" and calls[0][1]["algo"] == "ppo"
    assert not (tmp_path / "g").exists() and not (tmp_path / "r").exists()  # the loop makes the run dir


def test_a_locked_gym_run_dir_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "held"
    cfg = gym_config("cartpole-ppo", "run.total_steps=256", "gym.eval_interval_steps=0")
    with lock_run_dir(run), pytest.raises(RunDirError, match="in use by another speedflip process"):
        train_gym(cfg, run)
    assert not (run / "checkpoints").exists()  # refused before anything was written
    assert train_gym(cfg, run) == 0  # free again once the holder left


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
    cfg = gym_config("cartpole-ppo", "algo=ppo_recurrent", "ppo.normalize_obs=true", "recurrent.cell=gru")
    a = GymSession(cfg)
    a.iterate()
    assert a.collector.state is not None and a.collector.state.abs().sum() > 0  # memory carried between rollouts
    path = save_checkpoint(tmp_path, a.global_step, a.to_checkpoint(), keep=2)
    assert verify_checkpoint(path)["compat"]["network"] == {
        "cell": "gru", "hidden_size": 64, "num_layers": 1, "encoder_layers": [64], "head_layers": [64],
        "activation": "tanh",
    }  # fmt: skip
    b = GymSession(cfg)
    b.load(path)
    for key, value in a.learner.model.state_dict().items():
        assert torch.equal(b.learner.model.state_dict()[key], value)
    assert isinstance(a.learner, PPOLearner) and isinstance(b.learner, PPOLearner)
    np.testing.assert_array_equal(b.learner.obs_rms.mean, a.learner.obs_rms.mean)
    assert (b.global_step, b.iteration) == (a.global_step, a.iteration) == (256, 1)
    assert b.collector.state is not None
    assert b.collector.state.abs().sum() == 0 and b.collector.starts.all()  # fresh episodes: fresh memory
    a.close()
    b.close()


def test_kl_adaptive_learning_rate_moves_and_survives_resume(tmp_path: Path) -> None:
    """ppo.lr_target_kl: far above the updates' KL, every update raises the rate 1.5x (to the cap), and a
    resumed session goes on from the adapted rate, not from ppo.learning_rate."""
    cfg = gym_config("cartpole-ppo", "run.total_steps=4000", "ppo.learning_rate=0.0001", "ppo.lr_target_kl=10.0",
                     "ppo.learning_rate_max=0.0003", "ppo.anneal_lr=false")  # fmt: skip
    a = GymSession(cfg)
    used = [a.iterate()["charts/learning_rate"] for _ in range(3)]
    assert used == pytest.approx([0.0001, 0.00015, 0.000225])
    path = save_checkpoint(tmp_path, a.global_step, a.to_checkpoint(), keep=2)
    a.close()
    b = GymSession(cfg)
    b.load(path)
    assert b.iterate()["charts/learning_rate"] == pytest.approx(0.0003)  # 0.0003375, capped
    b.close()


def test_a_budget_spent_between_two_clock_readings_still_evaluates_the_final_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clock runs out right after ``between`` found time left (a loaded machine): the loop must not stop on
    that later reading, or the run ends without its final evaluation. Reading the clock once per iteration, the
    run trains one more iteration and evaluates then."""
    clock = {"ran_out": False}
    original_between = GymSession.between

    def between_then_run_out(self: GymSession, record: dict, console: Console) -> None:
        original_between(self, record, console)
        clock["ran_out"] = True  # from here on the clock reads far past the budget

    monkeypatch.setattr(GymSession, "between", between_then_run_out)
    monkeypatch.setattr(GymSession, "train_seconds", lambda self: 1e6 if clock["ran_out"] else 0.0)
    run = tmp_path / "cp"
    args = ["train", "--preset", "cartpole-ppo", "--run-dir", str(run), *FAST, "--set", "run.total_steps=10000000",
            "--set", "gym.eval_interval_steps=1000000", "--minutes", "1"]  # fmt: skip
    assert main(args) == 0
    records = _records(run)
    assert [r["global_step"] for r in records] == [256, 512]  # one iteration more than the clock allowed
    assert "eval/mean_return" not in records[0] and "eval/mean_return" in records[-1]


def test_time_budget_stops_resumes_and_anneals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--minutes: the run stops on its clock (saved, final evaluation), the clock goes on across a resume, a
    spent budget is reported as complete, and ppo.anneal_lr follows the time budget."""
    run = tmp_path / "cp"
    args = ["train", "--preset", "cartpole-ppo", "--run-dir", str(run), *FAST, "--set", "run.total_steps=10000000",
            "--set", "gym.eval_interval_steps=1000000"]  # fmt: skip
    assert main([*args, "--minutes", "0.002"]) == 0  # 0.12 s: one or a few iterations
    out = capsys.readouterr().out
    assert "time budget of 0.002 minutes reached" in out
    first = list_checkpoints(run / "checkpoints")[0]
    meta = verify_checkpoint(first)
    assert 0.12 <= meta["train_seconds"] < 60 and int(first.name) < 10_000_000
    assert any("eval/mean_return" in r for r in _records(run))  # the final policy is evaluated at the end
    assert main([*args, "--minutes", "0.002"]) == 0
    assert "already complete: it has trained" in capsys.readouterr().out
    assert [p.name for p in list_checkpoints(run / "checkpoints")] == [first.name]  # nothing trained or written
    # a larger budget (twice the minutes the first session trained, which a loaded machine makes more than 0.12 s)
    # resumes and trains on
    more = 2 * meta["train_seconds"] / 60 + 0.001
    assert main([*args, "--minutes", f"{more:.6f}"]) == 0
    newer = list_checkpoints(run / "checkpoints")[0]
    assert int(newer.name) > int(first.name)
    assert verify_checkpoint(newer)["train_seconds"] >= more * 60
    capsys.readouterr()
    assert main([*args, "--minutes", "0"]) == 2
    assert "--minutes must be a positive number of minutes, got 0" in capsys.readouterr().err

    cfg = gym_config("cartpole-ppo", "run.total_steps=10000000", "run.time_budget_minutes=1",
                     "ppo.learning_rate=0.001", "ppo.anneal_lr=true")  # fmt: skip
    session = GymSession(cfg)
    session.clock.before = 45.0  # three quarters of the minute already trained
    rate = session.iterate()["charts/learning_rate"]
    session.close()
    assert rate == pytest.approx(0.00025, rel=0.05)  # 0.001 * (1 - 45/60), less the moments of this session
