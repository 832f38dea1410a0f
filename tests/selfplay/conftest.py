"""Shared fixtures for the self-play tests: tiny trained runs (built once per session)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sp_helpers import train_tiny_run


@pytest.fixture(scope="session")
def run_1v1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory holding one checkpoint of a tiny 1v1 training run (read-only: copy before writing)."""
    run = tmp_path_factory.mktemp("runs") / "tiny1v1"
    train_tiny_run(run, team_size=1)
    return run


@pytest.fixture(scope="session")
def run_2v2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory holding one checkpoint of a tiny 2v2 training run."""
    run = tmp_path_factory.mktemp("runs") / "tiny2v2"
    train_tiny_run(run, team_size=2)
    return run
