"""Checkpoint files: atomic writes, checksums, rotation, never overwriting, no pickle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from sf_helpers import fake_checkpoint, flip_byte, tree_hashes, truncate

from speedflip.checkpoint import (
    TENSOR_FILES,
    CheckpointError,
    list_checkpoints,
    load_checkpoint,
    optimizer_from_tensors,
    optimizer_to_tensors,
    save_checkpoint,
    verify_checkpoint,
)


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path, 100, fake_checkpoint(2.0), keep=3)
    assert path == tmp_path / "100"
    assert sorted(p.name for p in path.iterdir()) == sorted([*TENSOR_FILES, "optimizer.json", "meta.json"])
    ckpt = load_checkpoint(path)
    assert torch.equal(ckpt.model["policy.0.weight"], torch.full((4, 3), 2.0))
    assert torch.equal(ckpt.optimizer_tensors["0.exp_avg"], torch.full((4, 3), 1.0))
    assert ckpt.state_tensors["obs_rms.mean"].dtype == torch.float64
    assert ckpt.meta["global_step"] == 100 and ckpt.meta["iteration"] == 1
    assert ckpt.optimizer_meta["param_groups"][0]["lr"] == 0.001
    assert not list(tmp_path.glob(".tmp-*"))  # the temporary folder was renamed away


@pytest.mark.parametrize("damage", [truncate, flip_byte], ids=["truncated", "flipped-byte"])
@pytest.mark.parametrize("name", [*TENSOR_FILES, "optimizer.json"])
def test_damaged_file_is_named(tmp_path: Path, damage: object, name: str) -> None:
    path = save_checkpoint(tmp_path, 8, fake_checkpoint(), keep=3)
    damage(path / name)  # type: ignore[operator]
    with pytest.raises(CheckpointError, match=rf"{name} does not match its checksum"):
        verify_checkpoint(path)
    with pytest.raises(CheckpointError, match=name):
        load_checkpoint(path)


def test_missing_file_and_missing_or_corrupt_meta(tmp_path: Path) -> None:
    a = save_checkpoint(tmp_path, 1, fake_checkpoint(), keep=5)
    (a / "state.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"state\.safetensors is missing"):
        verify_checkpoint(a)

    b = save_checkpoint(tmp_path, 2, fake_checkpoint(), keep=5)
    (b / "meta.json").unlink()
    with pytest.raises(CheckpointError, match=r"meta\.json is missing"):
        verify_checkpoint(b)

    c = save_checkpoint(tmp_path, 3, fake_checkpoint(), keep=5)
    truncate(c / "meta.json")
    with pytest.raises(CheckpointError, match=r"meta\.json is corrupt"):
        verify_checkpoint(c)

    d = save_checkpoint(tmp_path, 4, fake_checkpoint(), keep=5)
    meta = json.loads((d / "meta.json").read_text())
    meta["format_version"] = 999
    (d / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="format"):
        verify_checkpoint(d)

    e = save_checkpoint(tmp_path, 5, fake_checkpoint(), keep=5)
    meta = json.loads((e / "meta.json").read_text())
    del meta["sha256"]
    (e / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="no checksums"):
        verify_checkpoint(e)


def test_rotation_keeps_newest_by_number_not_by_name(tmp_path: Path) -> None:
    # "90" > "1000" as strings: rotation must compare steps as numbers
    for step in (90, 100, 9, 1000, 200):
        save_checkpoint(tmp_path, step, fake_checkpoint(), keep=3)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["1000", "200", "100"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["100", "1000", "200"]


def test_save_never_overwrites_an_existing_step(tmp_path: Path) -> None:
    first = save_checkpoint(tmp_path, 64, fake_checkpoint(1.0), keep=3)
    before = tree_hashes(tmp_path)
    again = save_checkpoint(tmp_path, 64, fake_checkpoint(5.0), keep=3)
    assert again == first
    assert tree_hashes(tmp_path) == before
    assert torch.equal(load_checkpoint(first).model["policy.0.weight"], torch.full((4, 3), 1.0))


def test_partial_tmp_folders_and_stray_entries_are_not_checkpoints(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, 10, fake_checkpoint(), keep=3)
    partial = tmp_path / ".tmp-20-12345"
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"half")
    (tmp_path / "notes").mkdir()
    (tmp_path / "30").write_text("a file, not a folder")
    assert [p.name for p in list_checkpoints(tmp_path)] == ["10"]
    assert list_checkpoints(tmp_path / "does-not-exist") == []


def test_failed_save_leaves_no_step_folder_and_no_tmp(tmp_path: Path) -> None:
    bad = fake_checkpoint()
    bad.model["shared"] = bad.model["policy.0.weight"]  # safetensors refuses shared storage
    with pytest.raises(RuntimeError, match="share memory"):
        save_checkpoint(tmp_path, 10, bad, keep=3)
    assert list(tmp_path.iterdir()) == []


def test_optimizer_tensors_round_trip_through_adam() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, eps=1e-5)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(4, 3)).pow(2).sum().backward()
        opt.step()
    tensors, meta = optimizer_to_tensors(opt.state_dict())
    meta = json.loads(json.dumps(meta))  # as it comes back from optimizer.json
    opt2 = torch.optim.Adam(model.parameters(), lr=0.5)
    opt2.load_state_dict(optimizer_from_tensors(tensors, meta))
    s1, s2 = opt.state_dict(), opt2.state_dict()
    assert s2["param_groups"][0]["lr"] == 0.01 and s2["param_groups"][0]["eps"] == 1e-5
    assert s1["state"].keys() == s2["state"].keys()
    for pid in s1["state"]:
        for key, value in s1["state"][pid].items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(s2["state"][pid][key])), (pid, key)


def test_saving_over_a_corrupt_checkpoint_leaves_a_usable_one(tmp_path: Path) -> None:
    # A run resumed from 100 because 200 was corrupt reaches step 200 again and saves.
    save_checkpoint(tmp_path, 100, fake_checkpoint(1.0), keep=3)
    flip_byte(save_checkpoint(tmp_path, 200, fake_checkpoint(2.0), keep=3) / "model.safetensors")
    path = save_checkpoint(tmp_path, 200, fake_checkpoint(3.0), keep=3)
    verify_checkpoint(path)  # raises CheckpointError today: the corrupt folder is returned as "saved"


def test_rotation_never_leaves_only_corrupt_checkpoints(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, 100, fake_checkpoint(1.0), keep=1)
    # 200 is written by hand (as if by an earlier process) and then damaged
    corrupt = save_checkpoint(tmp_path / "other", 200, fake_checkpoint(2.0), keep=1)
    corrupt.rename(tmp_path / "200")
    flip_byte(tmp_path / "200" / "model.safetensors")
    # the resumed run (from 100) saves at 150 with keep=1
    save_checkpoint(tmp_path, 150, fake_checkpoint(1.5), keep=1)
    usable = []
    for p in list_checkpoints(tmp_path):
        try:
            verify_checkpoint(p)
            usable.append(p.name)
        except CheckpointError:
            pass
    assert usable  # today: only the corrupt 200 is left; 100 and the new 150 were deleted
