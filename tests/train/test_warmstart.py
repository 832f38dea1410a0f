"""``speedflip train --from SPEC``: warm starts from a checkpoint, a milestone or a run directory."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from rich.console import Console
from sf_helpers import tiny_config, tree_hashes

from speedflip.algos.normalize import RunningMeanStd
from speedflip.algos.ppo_learner import load_weights
from speedflip.checkpoint import describe_lineage, load_checkpoint, run_lineage, verify_checkpoint
from speedflip.cli import main
from speedflip.config import Config, config_to_dict
from speedflip.models.build import build_policy_model
from speedflip.train.run import expected_compat, train
from speedflip.train.trainer import Trainer
from speedflip.train.warmstart import StartFromError, check_fits, compat_problems, resolve_start

STEP = 32  # 2 arenas x 2 cars x 8 steps per iteration


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Error messages on one line (rich wraps at the terminal width)."""
    monkeypatch.setenv("COLUMNS", "1000")


def _cfg(**sections: Any) -> Config:
    base: dict[str, Any] = {
        "run": {"total_steps": 2 * STEP, "checkpoint_interval_steps": STEP, "milestone_replays": False},
        "selfplay": {"snapshot_interval_steps": STEP, "rate_milestones": False},
    }
    for name, values in sections.items():
        base[name] = {**base.get(name, {}), **values}
    return tiny_config(**base)


def _train(cfg: Config, run: Path, **kwargs: Any) -> str:
    out = io.StringIO()
    code = train(cfg, run, console=Console(file=out, width=300), **kwargs)
    assert code == 0, out.getvalue()
    return out.getvalue()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A finished run with milestones at steps 32 and 64 and checkpoints at 32 and 64."""
    run = tmp_path_factory.mktemp("warm") / "source"
    _train(_cfg(), run)
    yield run


def _yaml(cfg: Config, path: Path) -> str:
    path.write_text(yaml.safe_dump(config_to_dict(cfg)))
    return str(path)


def test_spec_forms_resolve_to_the_right_checkpoint(source: Path) -> None:
    milestone = source / "milestones" / "main" / str(2 * STEP)
    assert resolve_start(f"{source}@{2 * STEP}").path == milestone.resolve()
    assert resolve_start(f"{source}@{2 * STEP}").kind == "milestone"
    assert resolve_start(str(milestone)).kind == "milestone"
    checkpoint = source / "checkpoints" / str(STEP)
    start = resolve_start(str(checkpoint))
    assert (start.path, start.kind, start.global_step) == (checkpoint.resolve(), "checkpoint", STEP)
    newest = resolve_start(str(source))
    assert newest.path == (source / "checkpoints" / str(2 * STEP)).resolve()
    assert newest.kind.startswith("newest checkpoint of")


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("@999", ["no milestone or checkpoint at step 999", "main/32", "main/64"]),
        ("/milestones", ["neither a checkpoint folder", "main/64", "@STEP"]),
        ("/milestones/main", ["neither a checkpoint folder", "pass one of them", "main/64"]),
        ("-nope", ["no such file or folder"]),
    ],
)
def test_bad_specs_name_the_problem(source: Path, spec: str, words: list[str]) -> None:
    with pytest.raises(StartFromError) as err:
        resolve_start(f"{source}{spec}")
    for word in words:
        assert word in str(err.value)


def test_first_policy_equals_the_milestone_with_other_rewards(source: Path) -> None:
    milestone = source / "milestones" / "main" / str(2 * STEP)
    cfg = _cfg(env={"rewards": {"goal": 5.0, "touch": 0.5}})  # another reward recipe, same network
    start = resolve_start(str(milestone))
    check_fits(start, expected_compat(cfg), cfg)
    trainer = Trainer(cfg)
    try:
        trainer.start_from(start.path, start.keep_step, start.lineage())
        assert (trainer.global_step, trainer.iteration) == (0, 0)  # steps count from 0
        weights = trainer.learner.policy_weights()  # what the first rollout acts with
        ckpt = load_checkpoint(milestone)
        # the milestone's policy, rebuilt independently from its files
        reference = build_policy_model(cfg, trainer.env.obs_dim, trainer.env.num_actions, "table", cfg.env.action_bins)
        reference.load_state_dict(ckpt.model)
        rms = RunningMeanStd((trainer.env.obs_dim,))
        rms.load_state_dict({k: ckpt.state_tensors[f"obs_rms.{k}"].numpy() for k in ("mean", "var", "count")})
        acting = build_policy_model(cfg, trainer.env.obs_dim, trainer.env.num_actions, "table", cfg.env.action_bins)
        acting_rms = RunningMeanStd((trainer.env.obs_dim,))
        load_weights(acting, acting_rms, weights)
        obs = np.random.default_rng(0).normal(size=(16, trainer.env.obs_dim)).astype(np.float32)
        assert float(ckpt.state_tensors["obs_rms.count"]) > 60  # 64 observations: learned statistics
        with torch.no_grad():
            expected_x, got_x = torch.as_tensor(rms.normalize(obs)), torch.as_tensor(acting_rms.normalize(obs))
            torch.testing.assert_close(acting.policy(got_x), reference.policy(expected_x), rtol=0, atol=0)
            torch.testing.assert_close(acting.value(got_x), reference.value(expected_x), rtol=0, atol=0)
            fresh = build_policy_model(cfg, trainer.env.obs_dim, trainer.env.num_actions, "table", cfg.env.action_bins)
            assert not torch.equal(fresh.policy(expected_x), reference.policy(expected_x))  # the check can fail
        # the new run's own state is fresh: Adam has no moments, the reward scaling starts over
        assert trainer.learner.optimizer.state_dict()["state"] == {}
        assert trainer.learner.return_norm.rms.count < 1.0
    finally:
        trainer.close()


def test_keep_step_continues_the_counter_and_the_optimizer(source: Path) -> None:
    milestone = source / "milestones" / "main" / str(STEP)
    start = resolve_start(str(milestone), keep_step=True)
    trainer = Trainer(_cfg())
    try:
        trainer.start_from(start.path, start.keep_step, start.lineage())
        assert (trainer.global_step, trainer.iteration) == (STEP, 1)
        state = trainer.learner.optimizer.state_dict()["state"]
        saved = load_checkpoint(milestone).optimizer_tensors
        first = state[0]
        torch.testing.assert_close(first["exp_avg"], saved["0.exp_avg"])
    finally:
        trainer.close()


def test_cli_from_a_milestone_records_lineage(source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "finetune"
    cfg = _cfg(env={"rewards": {"goal": 5.0, "touch": 0.5}}, run={"total_steps": STEP})
    out = io.StringIO()
    start = resolve_start(f"{source}@{2 * STEP}")
    code = train(cfg, run, console=Console(file=out, width=300), start=start)
    assert code == 0, out.getvalue()
    assert "started from" in out.getvalue() and "milestone, step 64" in out.getvalue()
    meta = verify_checkpoint(run / "checkpoints" / str(STEP))  # steps counted from 0 again
    lineage = meta["lineage"]
    assert len(lineage) == 1
    assert lineage[0]["from"] == str((source / "milestones" / "main" / "64").resolve())
    assert (lineage[0]["kind"], lineage[0]["global_step"], lineage[0]["kept_step"]) == ("milestone", 64, False)
    milestone_meta = verify_checkpoint(run / "milestones" / "main" / str(STEP))
    assert milestone_meta["lineage"] == lineage  # milestones carry it too
    assert run_lineage(run) == lineage and run_lineage(source) == []
    assert describe_lineage(lineage) == f"{lineage[0]['from']} (milestone, step 64)"
    assert main(["league", str(run)]) == 0  # the league of the new run names where it started
    assert f"this run started from: {lineage[0]['from']} (milestone, step 64)" in capsys.readouterr().out

    # a run started from that run: the chain grows, newest first
    grandchild = tmp_path / "grandchild"
    code = train(cfg, grandchild, console=Console(file=io.StringIO()), start=resolve_start(str(run)))
    assert code == 0
    chain = verify_checkpoint(grandchild / "checkpoints" / str(STEP))["lineage"]
    assert [entry["from"] for entry in chain] == [
        str((run / "checkpoints" / str(STEP)).resolve()),
        lineage[0]["from"],
    ]
    # and a plain resume keeps the lineage
    more = _cfg(env={"rewards": {"goal": 5.0, "touch": 0.5}}, run={"total_steps": 2 * STEP})
    _train(more, grandchild)
    assert verify_checkpoint(grandchild / "checkpoints" / str(2 * STEP))["lineage"] == chain


def test_cli_refuses_another_network_and_creates_nothing(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wide = _cfg(ppo={"policy_layers": [32]})
    run = tmp_path / "wide"
    code = main(["train", "--config", _yaml(wide, tmp_path / "wide.yaml"), "--run-dir", str(run),
                 "--from", f"{source}@{STEP}"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "policy_layers: checkpoint [16], this config [32]" in err
    assert "--set ppo.policy_layers=[16]" in err
    assert not run.exists()  # nothing created


def test_obs_size_difference_names_the_env_settings(source: Path) -> None:
    cfg = _cfg(env={"blue_size": 2, "orange_size": 2})
    start = resolve_start(f"{source}@{STEP}")
    problems = compat_problems(start.meta, expected_compat(cfg), cfg)
    assert len(problems) == 1
    assert "obs_dim: checkpoint 103, this config 153" in problems[0]
    assert "env.blue_size=1 (this config: 2)" in problems[0] and "env.orange_size=1" in problems[0]


def test_cli_refuses_a_run_dir_with_checkpoints(
    source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "used"
    _train(_cfg(run={"total_steps": STEP}), run)
    before = tree_hashes(run)
    code = main(["train", "--config", _yaml(_cfg(), tmp_path / "c.yaml"), "--run-dir", str(run),
                 "--from", f"{source}@{STEP}"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "already has checkpoints" in err and "--new" in err and "drop --from" in err
    assert tree_hashes(run) == before  # nothing changed
    # --from inside the new run's own directory is refused too
    code = main(["train", "--config", _yaml(_cfg(), tmp_path / "c.yaml"), "--run-dir", str(source),
                 "--from", f"{source}@{STEP}", "--new"])  # fmt: skip
    assert code == 2
    assert "lies inside the run directory" in capsys.readouterr().err
    assert (source / "checkpoints").is_dir()  # the source was not moved aside


def test_keep_step_needs_from(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--run-dir", str(tmp_path / "x"), "--from-keep-step"]) == 2
    assert "--from-keep-step needs --from" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_gym_run_from_a_checkpoint(tmp_path: Path) -> None:
    fast = ["--set", "run.device=cpu", "--set", "run.torch_threads=1", "--set", "run.tensorboard=false",
            "--set", "gym.eval_interval_steps=0"]  # fmt: skip
    first = tmp_path / "a"
    assert main(["train", "--preset", "cartpole-ppo", "--run-dir", str(first), *fast,
                 "--set", "run.total_steps=256"]) == 0  # fmt: skip
    second = tmp_path / "b"
    assert main(["train", "--preset", "cartpole-ppo", "--run-dir", str(second), *fast,
                 "--set", "run.total_steps=512", "--set", "ppo.learning_rate=1e-4",
                 "--from", str(first), "--from-keep-step"]) == 0  # fmt: skip
    # with --from-keep-step the counter continued from 256: one more rollout of 256 steps to 512
    records = [json.loads(line) for line in (second / "metrics.jsonl").read_text().splitlines()]
    assert [r["global_step"] for r in records] == [512]
    meta = verify_checkpoint(second / "checkpoints" / "512")
    assert meta["lineage"][0]["from"] == str((first / "checkpoints" / "256").resolve())
    assert meta["lineage"][0]["kept_step"] is True
