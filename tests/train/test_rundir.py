"""prepare_run_dir: which checkpoint to resume, what to skip, when to refuse, --new."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from sf_helpers import COMPAT, fake_checkpoint, flip_byte, tiny_config, tree_hashes, truncate

from speedflip.checkpoint import save_checkpoint
from speedflip.train.run import train
from speedflip.train.rundir import RunDirError, compat_signature, prepare_run_dir


def _run_with(tmp_path: Path, steps: tuple[int, ...], compat: dict[str, object] | None = None) -> Path:
    run = tmp_path / "run"
    for step in steps:
        save_checkpoint(run / "checkpoints", step, fake_checkpoint(float(step), compat), keep=10)
    (run / "config.yaml").write_text("ppo: {}\n")
    (run / "metrics.jsonl").write_text('{"global_step": 1}\n')
    return run


def test_fresh_directory_is_created(tmp_path: Path) -> None:
    run = tmp_path / "a" / "b"
    plan = prepare_run_dir(run, COMPAT, new=False)
    assert plan.checkpoint is None and plan.skipped == [] and plan.archived_to is None
    assert (run / "checkpoints").is_dir()


def test_resumes_newest_good_checkpoint(tmp_path: Path) -> None:
    run = _run_with(tmp_path, (100, 200))
    plan = prepare_run_dir(run, COMPAT, new=False)
    assert plan.checkpoint == run / "checkpoints" / "200"
    assert plan.skipped == []


@pytest.mark.parametrize("damage", [truncate, flip_byte], ids=["truncated", "flipped-byte"])
def test_corrupt_newest_is_skipped_with_reason(tmp_path: Path, damage: object) -> None:
    run = _run_with(tmp_path, (100, 200))
    damage(run / "checkpoints" / "200" / "model.safetensors")  # type: ignore[operator]
    before = tree_hashes(run)
    plan = prepare_run_dir(run, COMPAT, new=False)
    assert plan.checkpoint == run / "checkpoints" / "100"
    assert len(plan.skipped) == 1
    assert "200" in plan.skipped[0] and "model.safetensors" in plan.skipped[0]
    assert "checksum" in plan.skipped[0]
    assert tree_hashes(run) == before  # the corrupt checkpoint is left where it is


def test_partial_tmp_folder_is_ignored(tmp_path: Path) -> None:
    run = _run_with(tmp_path, (100,))
    partial = run / "checkpoints" / ".tmp-300-4242"
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"\x00" * 10)
    plan = prepare_run_dir(run, COMPAT, new=False)
    assert plan.checkpoint == run / "checkpoints" / "100"
    assert plan.skipped == []
    assert partial.is_dir()  # not deleted either


def test_incompatible_checkpoint_is_refused(tmp_path: Path) -> None:
    run = _run_with(tmp_path, (100,), compat={**COMPAT, "policy_layers": [32, 32]})
    before = tree_hashes(run)
    with pytest.raises(RunDirError) as info:
        prepare_run_dir(run, COMPAT, new=False)
    message = str(info.value)
    assert "policy_layers" in message and "[32, 32]" in message and "[16]" in message
    assert "--new" in message
    assert tree_hashes(run) == before


def test_all_corrupt_is_refused_and_untouched(tmp_path: Path) -> None:
    run = _run_with(tmp_path, (100, 200))
    flip_byte(run / "checkpoints" / "100" / "state.safetensors")
    truncate(run / "checkpoints" / "200" / "optimizer.safetensors")
    before = tree_hashes(run)
    with pytest.raises(RunDirError) as info:
        prepare_run_dir(run, COMPAT, new=False)
    message = str(info.value)
    assert "none can be loaded" in message
    assert "state.safetensors" in message and "optimizer.safetensors" in message
    assert "--new" in message
    assert tree_hashes(run) == before


def test_new_moves_the_old_run_aside(tmp_path: Path) -> None:
    run = _run_with(tmp_path, (100, 200))
    before = tree_hashes(run)
    plan = prepare_run_dir(run, COMPAT, new=True)
    assert plan.checkpoint is None
    assert plan.archived_to is not None and plan.archived_to.parent == tmp_path
    assert plan.archived_to.name.startswith("run-archived-")
    assert tree_hashes(plan.archived_to) == before  # everything kept, byte for byte
    assert sorted(p.name for p in run.iterdir()) == ["checkpoints"]
    assert list((run / "checkpoints").iterdir()) == []


def test_new_on_an_empty_or_missing_dir_archives_nothing(tmp_path: Path) -> None:
    plan = prepare_run_dir(tmp_path / "missing", COMPAT, new=True)
    assert plan.archived_to is None
    assert [p.name for p in tmp_path.iterdir()] == ["missing"]


def test_compat_signature_lists_copies() -> None:
    layers = [8, 8]
    sig = compat_signature(10, 4, layers, [3])
    layers.append(1)
    assert sig == {
        "obs_dim": 10,
        "num_actions": 4,
        "policy_layers": [8, 8],
        "critic_layers": [3],
        "action_form": "table",
    }


@pytest.mark.parametrize("problem", ["incompatible", "all-corrupt"])
def test_failed_train_start_modifies_nothing(tmp_path: Path, problem: str) -> None:
    # compat as train() computes it for a 1v1 config with [16] networks, except the critic
    real = {"obs_dim": 103, "num_actions": 90, "policy_layers": [16], "critic_layers": [16]}
    if problem == "incompatible":
        run = _run_with(tmp_path, (64, 128), compat={**real, "critic_layers": [64]})
    else:
        run = _run_with(tmp_path, (64, 128), compat=real)
        for step in (64, 128):
            flip_byte(run / "checkpoints" / str(step) / "model.safetensors")
    before = tree_hashes(run)
    with pytest.raises(RunDirError, match="--new") as info:
        train(tiny_config(), run)
    expected = "critic_layers: checkpoint [64] vs config [16]" if problem == "incompatible" else "none can be"
    assert expected in str(info.value)
    assert tree_hashes(run) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # nothing archived or created


def test_new_with_dot_run_dir_is_a_user_error_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "old.txt").write_text("keep me")
    monkeypatch.chdir(work)
    with contextlib.suppress(RunDirError):  # refusing with a message is fine too
        prepare_run_dir(Path("."), COMPAT, new=True)
    assert (tmp_path / "work" / "old.txt").exists() or any(tmp_path.glob("work-archived-*/old.txt"))
