"""``speedflip export`` of a run trained with its own lookup table (``env.action_table``) ships that table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import train_tiny

from speedflip.cli import main
from speedflip.env.action_forms import build_table
from speedflip.export.exporter import check_layout, read_source
from speedflip.export.parity import record_match, replay_through_bot

THREE = [-1.0, 0.0, 1.0]


@pytest.fixture(scope="module")
def custom_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("export-runs") / "custom1v1"
    train_tiny(run, 1, {"action_table": {"steer": THREE, "torque": THREE}})
    return run


def test_export_writes_the_runs_table(custom_run: Path, tmp_path: Path) -> None:
    expected = build_table(THREE, THREE, THREE)
    src = read_source(str(custom_run))
    assert src.num_actions == 81
    _, table, _, _ = check_layout(src)
    np.testing.assert_array_equal(table, expected)

    out = tmp_path / "bot"
    sidecar = tmp_path / "policy.pt"
    assert main(["export", str(custom_run), "--rlbot", str(out), "--torchscript", str(sidecar)]) == 0
    settings = json.loads((out / "speedflip_bot.json").read_text())
    assert len(settings["action_table"]) == 81
    np.testing.assert_allclose(np.asarray(settings["action_table"], np.float32), expected)
    assert "81-row lookup table" in (out / "README.md").read_text()
    side = json.loads(sidecar.with_name(sidecar.name + ".json").read_text())
    np.testing.assert_allclose(np.asarray(side["action_table"], np.float32), expected)

    # the bundled bot picks the same rows training picks, and its controls come from the run's table
    recording = record_match(src.checkpoint, src.obs_options, src.team_size, steps=20)
    result = replay_through_bot(out, recording)
    assert result.ok, result.summary()
    assert recording.actions.max() < 81
