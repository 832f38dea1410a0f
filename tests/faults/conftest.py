"""Fault-injection suite: shared fixtures and the figures printed at the end of the session."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FIGURES: dict[str, Any] = {}
"""Measurements the tests record (kills survived, steps lost, inputs with a clear error ...)."""


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if FIGURES:
        terminalreporter.write_sep("-", "fault-injection figures")
        for name, value in FIGURES.items():
            terminalreporter.write_line(f"{name}: {json.dumps(value)}")


@pytest.fixture
def figures() -> dict[str, Any]:
    return FIGURES


def _mount_tmpfs(target: Path, options: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)], capture_output=True)
    return done.returncode == 0


@pytest.fixture
def readonly_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder nobody can write to: a read-only tmpfs as root (root ignores permissions), else chmod 555."""
    folder = tmp_path / "readonly"
    folder.mkdir()
    if os.geteuid() == 0:
        if not _mount_tmpfs(folder, "ro,size=64k"):
            pytest.skip("running as root and cannot mount a read-only tmpfs")
        try:
            yield folder
        finally:
            subprocess.run(["umount", str(folder)], check=False)
        return
    folder.chmod(0o555)
    try:
        yield folder
    finally:
        folder.chmod(0o755)
