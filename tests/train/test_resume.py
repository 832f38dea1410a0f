"""Resuming from a checkpoint continues the run bit for bit; checkpoint files hold no pickle."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors import safe_open
from sf_helpers import tiny_config

from speedflip.checkpoint import TENSOR_FILES
from speedflip.train.trainer import Trainer


@pytest.fixture
def trainer_a() -> Iterator[Trainer]:
    trainer = Trainer(tiny_config())
    yield trainer
    trainer.close()


def _params(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


def test_resume_is_bit_for_bit(tmp_path: Path, trainer_a: Trainer) -> None:
    a = trainer_a
    batch1, raw1, _ = a.collect()
    a.update(batch1, raw1)

    # what A looks like at save time
    saved = {
        "torch_rng": torch.get_rng_state().clone(),
        "generator": a.learner.generator.get_state().clone(),
        "numpy_rng": a.env.get_rng_state(),
        "obs_rms": a.obs_rms.state_dict(),
        "ret_rms": a.learner.return_norm.rms.state_dict(),
        "ret_returns": a.learner.return_norm.returns.copy(),
        "global_step": a.global_step,
        "iteration": a.iteration,
    }
    path = a.save(tmp_path / "checkpoints")
    assert path.name == str(saved["global_step"]) == "32"  # 2 arenas x 2 cars x 8 steps
    assert torch.equal(torch.get_rng_state(), saved["torch_rng"])  # saving draws nothing

    batch2, raw2, _ = a.collect()
    a.update(batch2, raw2)
    weights_a = _params(a)
    opt_a = a.learner.optimizer.state_dict()

    b = Trainer(tiny_config())
    try:
        torch.manual_seed(12345)  # B's RNG is somewhere else before load
        b.load(path)
        # RNG states, normalizers and counters are A's at save time
        assert torch.equal(torch.get_rng_state(), saved["torch_rng"])
        assert torch.equal(b.learner.generator.get_state(), saved["generator"])
        assert b.env.get_rng_state() == saved["numpy_rng"]
        for key, value in saved["obs_rms"].items():
            np.testing.assert_array_equal(b.obs_rms.state_dict()[key], value)
        for key, value in saved["ret_rms"].items():
            np.testing.assert_array_equal(b.learner.return_norm.rms.state_dict()[key], value)
        np.testing.assert_array_equal(b.learner.return_norm.returns, saved["ret_returns"])
        assert (b.global_step, b.iteration) == (saved["global_step"], saved["iteration"]) == (32, 1)

        # sampling continues identically: B's next draws are the ones A made right after the save
        draws_b = torch.rand(8)
        torch.set_rng_state(saved["torch_rng"])
        assert torch.equal(draws_b, torch.rand(8))

        b.update(batch2, raw2)
        weights_b = _params(b)
        assert weights_a.keys() == weights_b.keys()
        for name in weights_a:
            assert torch.equal(weights_a[name], weights_b[name]), name
        _assert_same_optimizer_state(opt_a, b.learner.optimizer.state_dict())
        np.testing.assert_array_equal(a.obs_rms.mean, b.obs_rms.mean)
        np.testing.assert_array_equal(a.obs_rms.var, b.obs_rms.var)
        assert a.obs_rms.count == b.obs_rms.count
        assert a.iteration == b.iteration == 2
        # the update really changed the weights (the comparison above is not trivially true)
        ckpt_weight = _params_of_checkpoint(path)
        assert any(not torch.equal(ckpt_weight[k], weights_b[k]) for k in weights_b)
    finally:
        b.close()


def _params_of_checkpoint(path: Path) -> dict[str, torch.Tensor]:
    with safe_open(str(path / "model.safetensors"), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 - safe_open has no __iter__


def _assert_same_optimizer_state(sa: dict[str, Any], sb: dict[str, Any]) -> None:
    assert sa["state"].keys() == sb["state"].keys()
    assert len(sa["state"]) > 0
    for pid in sa["state"]:
        assert sa["state"][pid].keys() == sb["state"][pid].keys()
        for key, value in sa["state"][pid].items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(sb["state"][pid][key])), (pid, key)
    for ga, gb in zip(sa["param_groups"], sb["param_groups"], strict=True):
        for key in ("lr", "eps", "weight_decay", "amsgrad", "params"):
            assert ga[key] == gb[key], key
        assert tuple(ga["betas"]) == tuple(gb["betas"])


def test_checkpoint_files_are_safetensors_and_json_only(tmp_path: Path, trainer_a: Trainer) -> None:
    batch, raw, _ = trainer_a.collect()
    trainer_a.update(batch, raw)
    path = trainer_a.save(tmp_path / "checkpoints", {"reason": "test"})

    names = sorted(p.name for p in path.iterdir())
    assert names == sorted([*TENSOR_FILES, "optimizer.json", "meta.json"])
    for name in names:
        head = (path / name).read_bytes()[:2]
        assert head[:1] != b"\x80" and head != b"PK"  # neither a raw pickle nor a torch.save zip
    for name in TENSOR_FILES:
        with safe_open(str(path / name), framework="pt") as f:
            assert len(list(f.keys())) > 0
    with safe_open(str(path / "model.safetensors"), framework="pt") as f:
        assert set(f.keys()) == set(trainer_a.model.state_dict())
    json.loads((path / "optimizer.json").read_text())

    meta = json.loads((path / "meta.json").read_text())
    for key in ("sha256", "global_step", "compat", "config", "owner", "git_commit", "iteration", "reason"):
        assert key in meta, key
    assert meta["global_step"] == 32 and meta["iteration"] == 1 and meta["reason"] == "test"
    assert meta["compat"] == {
        "obs_dim": 103,
        "num_actions": 90,
        "policy_layers": [16],
        "critic_layers": [16],
        "action_form": "table",
    }
    assert meta["config"]["ppo"]["num_steps"] == 8
    assert meta["owner"] == trainer_a.cfg.run.owner
    assert set(meta["sha256"]) == {*TENSOR_FILES, "optimizer.json"}
    for name, digest in meta["sha256"].items():
        assert digest == hashlib.sha256((path / name).read_bytes()).hexdigest(), name
