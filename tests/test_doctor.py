"""``speedflip doctor`` and the startup verification routine."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import ModuleType

import pytest

from speedflip import doctor
from speedflip.cli import main
from speedflip.config import EnvConfig
from speedflip.models.mlp import ActorCritic


def test_doctor_is_healthy_here(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "doctor.json"
    assert main(["doctor", "--seconds", "0.1", "--json", str(report)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    words = ["python", "torch", "rocketsim", "rlgym-rocket-league", "numpy", "cpu", "threads", "cuda", "meshes"]
    words += ["action table", "observation", "forward pass", "ticks/s", "healthy"]
    for word in words:
        assert word in out, word
    data = json.loads(report.read_text())
    assert data["healthy"] is True
    assert {"versions", "machine", "startup checks", "speed"} <= set(data["sections"])


def test_missing_meshes_fail_with_a_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import speedflip.env.sim as sim

    monkeypatch.setattr(sim, "default_meshes_dir", lambda: tmp_path / "nowhere")
    assert main(["doctor", "--seconds", "0.1"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "FAIL" in out and "1 check(s) failed" in out
    assert "pip install --force-reinstall rlgym-rocket-league" in out


def test_missing_required_package_fails_with_a_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def fake(name: str, package: str | None = None) -> ModuleType:
        if name == "RocketSim":
            raise ImportError("libstdc++ too old")
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", fake)
    checks = {c.name: c for c in doctor.version_checks()}
    assert checks["rocketsim"].status == "fail" and "pip install" in checks["rocketsim"].fix
    assert checks["torch"].status == "ok"


def test_startup_checks_for_a_config_and_a_model() -> None:
    cfg = EnvConfig(blue_size=2, orange_size=2)
    checks = doctor.startup_checks(cfg)
    assert [c.name for c in checks] == ["meshes", "action table", "observation", "forward pass"]
    assert all(c.ok for c in checks), checks
    assert "153 floats" in checks[2].detail
    doctor.raise_on_failure(checks)  # nothing raised

    wrong = ActorCritic(103, 90, [8], [8])  # a 1v1 network for a 2v2 env
    checks = doctor.startup_checks(cfg, model=wrong)
    assert checks[-1].status == "fail" and "103 inputs" in checks[-1].detail
    with pytest.raises(doctor.StartupCheckError, match=r"forward pass: .* -> fix: "):
        doctor.raise_on_failure(checks)


def test_startup_checks_report_a_broken_action_table(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    import speedflip.env.actions as actions

    table = actions.default_lookup_table()
    monkeypatch.setattr(actions, "default_lookup_table", lambda: table[np.any(table != 0, axis=1)])
    checks = {c.name: c for c in doctor.startup_checks()}
    check = checks["action table"]
    assert check.status == "fail" and ("all-zero row" in check.fix or "neutral row" in check.fix), check
