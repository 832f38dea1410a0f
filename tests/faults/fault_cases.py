"""Malformed inputs for ``speedflip train``: each must end with its exit code (2: a user error), no
traceback, and a message that names the key or file. Used by test_faults_inputs.py and by
benchmarks/faults_report.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from faults_helpers import TINY, tree_hashes

from speedflip.cli import main


@dataclass(frozen=True)
class Case:
    """One malformed input: ``setup(tmp)`` writes any files and returns the extra CLI arguments."""

    name: str
    setup: Callable[[Path], list[str]]
    expect: tuple[str, ...]
    code: int = 2
    readonly: bool = False


@dataclass
class Outcome:
    code: int
    output: str

    def problems(self, case: Case) -> list[str]:
        found = []
        if self.code != case.code:
            found.append(f"exit code {self.code}, expected {case.code}")
        if "Traceback" in self.output:
            found.append("a traceback was printed")
        found += [f"message lacks {text!r}" for text in case.expect if text not in self.output]
        return found


def base_args(tmp: Path) -> list[str]:
    return ["train", "--preset", "quick", "--run-dir", str(tmp / "run"), *TINY, "--set", "run.total_steps=64"]


def run_in_process(case: Case, tmp: Path) -> Outcome:
    """``speedflip.cli.main`` with the case's arguments, stdout and stderr captured."""
    argv = base_args(tmp) + case.setup(tmp)
    out, err = io.StringIO(), io.StringIO()
    old_columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "400"  # one line per message: substrings are not cut by wrapping
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        if old_columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old_columns
    return Outcome(code, out.getvalue() + err.getvalue())


def run_subprocess(case: Case, tmp: Path) -> Outcome:
    """The same through a real ``python -m speedflip.cli`` process."""
    import sys

    argv = base_args(tmp) + case.setup(tmp)
    env = {**os.environ, "COLUMNS": "400", "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run(
        [sys.executable, "-m", "speedflip.cli", *argv], env=env, capture_output=True, text=True, timeout=120
    )
    return Outcome(done.returncode, done.stdout + done.stderr)


# ---------------------------------------------------------------------- builders
# (YAML cases use keys the base --set arguments do not override: --set is applied after the file)
def _yaml(text: str | bytes) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        path = tmp / "my.yaml"
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        return ["--config", str(path)]

    return setup


def _sets(*overrides: str) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        return [arg for o in overrides for arg in ("--set", o)]

    return setup


def _args(*args: str) -> Callable[[Path], list[str]]:
    return lambda tmp: list(args)


def _missing_config(tmp: Path) -> list[str]:
    return ["--config", str(tmp / "nope.yaml")]


def _config_is_dir(tmp: Path) -> list[str]:
    (tmp / "conf.d").mkdir()
    return ["--config", str(tmp / "conf.d")]


def _run_dir_is_file(tmp: Path) -> list[str]:
    (tmp / "afile").write_text("not a folder")
    return ["--run-dir", str(tmp / "afile")]


def _run_dir_under_file(tmp: Path) -> list[str]:
    (tmp / "afile").write_text("not a folder")
    return ["--run-dir", str(tmp / "afile" / "run")]


def _run_dir_readonly(tmp: Path) -> list[str]:
    return ["--run-dir", str(tmp / "readonly" / "run")]


def _fake_checkpoint(run: Path, compat: dict[str, object], step: int = 64, model_key: str = "policy.0.weight") -> None:
    from speedflip.checkpoint import Checkpoint, save_checkpoint

    ckpt = Checkpoint(
        model={model_key: torch.zeros(4, 3)},
        optimizer_tensors={"0.exp_avg": torch.zeros(4, 3)},
        optimizer_meta={"param_groups": [{"lr": 0.001, "params": [0]}], "scalars": {}},
        state_tensors={"obs_rms.mean": torch.zeros(3, dtype=torch.float64)},
        meta={"compat": compat, "iteration": 1},
    )
    save_checkpoint(run / "checkpoints", step, ckpt, keep=5)


REAL_COMPAT = {
    "obs_dim": 103, "num_actions": 90, "policy_layers": [16], "critic_layers": [16], "action_form": "table",
}  # fmt: skip


def _incompatible_checkpoint(tmp: Path) -> list[str]:
    _fake_checkpoint(tmp / "run", {**REAL_COMPAT, "policy_layers": [32, 32]})
    return []


def _unknown_format_checkpoint(tmp: Path) -> list[str]:
    _fake_checkpoint(tmp / "run", REAL_COMPAT)
    meta_path = tmp / "run" / "checkpoints" / "64" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["format_version"] = 99
    meta_path.write_text(json.dumps(meta))
    return []


def _checkpoint_that_does_not_fit(tmp: Path) -> list[str]:
    _fake_checkpoint(tmp / "run", REAL_COMPAT, model_key="not.a.layer")  # right signature, wrong tensors
    return []


def _bad_games_csv(content: bytes) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        (tmp / "run").mkdir()
        (tmp / "run" / "games.csv").write_bytes(content)
        return []

    return setup


def _corrupt_league(tmp: Path) -> list[str]:
    (tmp / "run").mkdir()
    (tmp / "run" / "league.json").write_text('{"players": {"main": {"rating": ')
    return []


CASES: list[Case] = [
    # YAML files
    Case("yaml-indentation", _yaml("env:\n  num_arenas: 4\n   tick_skip: 8\n"), ("my.yaml", "valid YAML", "line 3")),
    Case("yaml-tab", _yaml("env:\n\tnum_arenas: 4\n"), ("my.yaml", "not valid YAML")),
    Case("yaml-unclosed-brace", _yaml("ppo: {num_steps: 8\n"), ("my.yaml", "not valid YAML")),
    Case("yaml-top-level-list", _yaml("- env\n- ppo\n"), ("my.yaml", "must hold a mapping")),
    Case("yaml-binary", _yaml(b"\xff\xfe\x00\x81garbage"), ("my.yaml", "cannot be read")),
    Case("yaml-unknown-key", _yaml("ppo:\n  lerning_rate: 0.1\n"), ("ppo.lerning_rate", "ppo.learning_rate")),
    Case("yaml-unknown-section", _yaml("trainer:\n  x: 1\n"), ("unknown key 'trainer'",)),
    Case("yaml-section-not-mapping", _yaml("selfplay: 5\n"), ("key 'selfplay'",)),
    Case("yaml-wrong-type", _yaml("env:\n  blue_size: many\n"), ("key 'env.blue_size'", "'many'")),
    Case("config-missing", _missing_config, ("nope.yaml", "does not exist")),
    Case("config-is-directory", _config_is_dir, ("conf.d", "is a directory")),
    # --set
    Case("set-without-equals", _sets("ppo.gamma"), ("ppo.gamma", "key=value")),
    Case("set-empty-key", _sets("=3"), ("empty key",)),
    Case("set-unknown-key", _sets("ppo.lerning_rate=1"), ("ppo.lerning_rate", "Did you mean 'ppo.learning_rate'")),
    Case("wrong-type-list", _sets("ppo.policy_layers=256"), ("ppo.policy_layers",)),
    Case("num-arenas-zero", _sets("env.num_arenas=0"), ("env.num_arenas",)),
    Case("team-too-large", _sets("env.blue_size=4"), ("env.blue_size",)),
    Case("gamma-above-1", _sets("ppo.gamma=1.5"), ("ppo.gamma",)),
    Case("gamma-zero", _sets("ppo.gamma=0"), ("ppo.gamma",)),
    Case("gae-lambda-negative", _sets("ppo.gae_lambda=-0.1"), ("ppo.gae_lambda",)),
    Case("clip-zero", _sets("ppo.clip_coef=0"), ("ppo.clip_coef",)),
    Case("num-steps-zero", _sets("ppo.num_steps=0"), ("ppo.num_steps",)),
    Case("tick-skip-zero", _sets("env.tick_skip=0"), ("env.tick_skip",)),
    Case("total-steps-negative", _sets("run.total_steps=-5"), ("run.total_steps",)),
    Case("keep-checkpoints-zero", _sets("run.keep_checkpoints=0"), ("run.keep_checkpoints",)),
    Case("learning-rate-nan", _sets("ppo.learning_rate=.nan"), ("ppo.learning_rate", "bad value nan")),
    Case("reward-weight-inf", _sets("env.rewards.goal=.inf"), ("env.rewards", "'goal' is inf")),
    Case("unknown-reward", _sets("env.rewards={bogus: 1}"), ("env.rewards", "unknown reward component")),
    Case("setter-weights-zero", _sets("env.state_setters={kickoff: 0}"), ("env.state_setters",)),
    Case("minibatch-over-batch", _sets("ppo.minibatch_size=100000"), ("ppo.minibatch_size", "rollout batch")),
    Case("device-unknown", _sets("run.device=tpu"), ("run.device",)),
    Case("collector-unknown", _sets("run.collector=threads"), ("run.collector",)),
    Case("seed-too-large", _sets("run.seed=99999999999"), ("run.seed",)),
    Case("layer-too-wide", _sets("ppo.critic_layers=[1000000]"), ("ppo.critic_layers",)),
    Case("curriculum-no-stages", _sets("curriculum.enabled=true", "curriculum.stages=[]"), ("curriculum.stages",)),
    Case(
        "curriculum-stage-never-ends",
        _sets("curriculum.enabled=true", "curriculum.stages=[{name: a}, {name: b}]"),
        ("curriculum.stages", "stage 'a'"),
    ),
    Case("win-rate-above-1", _sets("selfplay.target_win_rate=1.5"), ("selfplay.target_win_rate",)),
    Case(
        "mechanics-phase-missing",
        _sets("env.mechanics_share=0.5", "env.mechanics_from_phase=2"),
        ("mechanics_from_phase",),
    ),
    Case(
        "masking-needs-table",
        _sets("env.action_form=continuous", "env.action_masking=true"),
        ("env.action_masking",),
    ),
    Case("meshes-dir-missing", _sets("env.meshes_dir=/nonexistent/meshes"), ("/nonexistent/meshes",)),
    Case("unknown-preset", _args("--preset", "quik"), ("unknown preset 'quik'", "Did you mean 'quick'")),
    Case("unknown-gym-env", _args("--env", "gym:NoSuchEnv-v0"), ("NoSuchEnv-v0",)),
    # run directories and the files in them
    Case("run-dir-is-a-file", _run_dir_is_file, ("afile", "is a file")),
    Case("run-dir-under-a-file", _run_dir_under_file, ("afile", "not writable")),
    Case("run-dir-read-only", _run_dir_readonly, ("readonly", "not writable"), readonly=True),
    Case("checkpoint-other-layout", _incompatible_checkpoint, ("different setup", "policy_layers", "--new")),
    Case("checkpoint-unknown-format", _unknown_format_checkpoint, ("unknown checkpoint format", "none can be loaded")),
    Case("checkpoint-does-not-fit", _checkpoint_that_does_not_fit, ("checkpoints/64", "does not fit this run")),
    Case("games-csv-wrong-header", _bad_games_csv(b"a,b,c\n1,2,3\n"), ("games.csv", "left untouched")),
    Case("games-csv-binary", _bad_games_csv(b"\x00\xff\xfe\x81\x00\n"), ("games.csv", "left untouched")),
    # a documented recovery, not an error: the corrupt file is kept as league.json.bad, ratings rebuilt
    Case("league-json-corrupt", _corrupt_league, ("league.json", "was corrupt", "league.json.bad"), code=0),
]

UNTOUCHED = {"checkpoint-other-layout", "checkpoint-unknown-format", "games-csv-wrong-header", "games-csv-binary"}
"""Cases whose run directory must be left exactly as it was."""


@contextlib.contextmanager
def readonly_folder(folder: Path) -> Iterator[bool]:
    """Make ``folder`` unwritable for this process: a read-only tmpfs as root, chmod 555 otherwise.
    Yields False if that is not possible here."""
    folder.mkdir(exist_ok=True)
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield True
        finally:
            folder.chmod(0o755)
        return
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)], capture_output=True, check=False
    )
    if done.returncode != 0:
        yield False
        return
    try:
        yield True
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def check_case(case: Case, tmp: Path, runner: Callable[[Case, Path], Outcome] = run_in_process) -> list[str] | None:
    """Run one case in ``tmp``; its problems (empty: a clear error), or None if it cannot run here."""
    with readonly_folder(tmp / "readonly") if case.readonly else contextlib.nullcontext(True) as ready:
        if not ready:
            return None
        before = None
        if case.name in UNTOUCHED:
            case.setup(tmp)  # build the files first to hash them; setup is run again by the runner
            before = tree_hashes(tmp / "run")
            outcome = runner(Case(case.name, lambda t: [], case.expect, case.code), tmp)
        else:
            outcome = runner(case, tmp)
        problems = outcome.problems(case)
        if before is not None and tree_hashes(tmp / "run") != before:
            problems.append("the run directory was modified")
        if case.name == "league-json-corrupt" and not (tmp / "run" / "league.json.bad").is_file():
            problems.append("the corrupt league.json was not kept as league.json.bad")
        if problems:
            problems.append(f"output:\n{outcome.output[-3000:]}")
        return problems
