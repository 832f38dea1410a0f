"""benchmarks/average_milestones.py: the weight average of a run's newest milestones, computed by hand."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from benchmark_modules import load_benchmark
from speedflip.checkpoint import Checkpoint, list_checkpoints, load_checkpoint, save_checkpoint


@pytest.fixture
def average_milestones() -> ModuleType:
    return load_benchmark("average_milestones")


def milestone(weight: float, bias: float, obs_mean: float) -> Checkpoint:
    return Checkpoint(
        model={"policy.0.weight": torch.full((2, 3), weight), "policy.0.bias": torch.tensor([bias, -bias])},
        optimizer_tensors={"state.0.exp_avg": torch.zeros(2)},
        optimizer_meta={"param_groups": []},
        state_tensors={"obs_rms.mean": torch.full((3,), obs_mean)},
        meta={"iteration": int(weight)},
    )


def test_the_average_is_the_mean_of_each_tensor_and_keeps_the_newest_state(average_milestones: ModuleType) -> None:
    newest, older, oldest = milestone(3.0, 1.0, 9.0), milestone(1.0, 0.5, 5.0), milestone(2.0, 0.0, 1.0)
    averaged = average_milestones.average_checkpoints([newest, older, oldest], ["300", "200", "100"])
    # (3 + 1 + 2) / 3 = 2 for every weight; biases (1 + 0.5 + 0) / 3 = 0.5 and its negative
    assert torch.equal(averaged.model["policy.0.weight"], torch.full((2, 3), 2.0))
    assert torch.allclose(averaged.model["policy.0.bias"], torch.tensor([0.5, -0.5]))
    assert averaged.model["policy.0.weight"].dtype == torch.float32
    assert torch.equal(averaged.state_tensors["obs_rms.mean"], torch.full((3,), 9.0))  # the newest normaliser
    assert averaged.meta["averaged_from"] == ["300", "200", "100"]
    assert averaged.meta["iteration"] == 3


def test_milestones_of_another_network_are_refused(average_milestones: ModuleType) -> None:
    other = milestone(1.0, 0.0, 0.0)
    other.model["policy.0.weight"] = torch.zeros(4, 3)
    with pytest.raises(ValueError, match="another network"):
        average_milestones.average_checkpoints([milestone(1.0, 0.0, 0.0), other], ["2", "1"])


def test_main_writes_a_loadable_one_milestone_run(
    average_milestones: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stage = tmp_path / "run" / "milestones" / "main"
    for step, weight in ((1000, 8.0), (2000, 4.0), (3000, 2.0)):
        save_checkpoint(stage, step, milestone(weight, 0.0, 0.0), keep=10)
    out = tmp_path / "avg"
    monkeypatch.setattr(sys, "argv", ["average_milestones.py", str(tmp_path / "run"), "--last", "2", "--out", str(out)])
    average_milestones.main()
    [folder] = list_checkpoints(out / "milestones" / "main")
    assert folder.name == "3000"  # named by the newest milestone averaged
    loaded = load_checkpoint(folder)  # checksums verified
    assert torch.equal(loaded.model["policy.0.weight"], torch.full((2, 3), 3.0))  # (2 + 4) / 2, not the 8
    assert loaded.meta["averaged_from"] == ["3000", "2000"]


def test_main_refuses_a_run_with_too_few_milestones(
    average_milestones: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_checkpoint(tmp_path / "run" / "milestones" / "main", 1000, milestone(1.0, 0.0, 0.0), keep=10)
    monkeypatch.setattr(sys, "argv", ["x", str(tmp_path / "run"), "--last", "4", "--out", str(tmp_path / "avg")])
    with pytest.raises(SystemExit, match="fewer than --last 4"):
        average_milestones.main()
