"""Fault-injection suite: shared fixtures and the figures printed at the end of the session."""

from __future__ import annotations

import json
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
