"""30+ malformed inputs: each a clear error (exit 2, no traceback, the key or file named) or a documented
recovery, and never a silent change of the user's files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fault_cases import CASES, check_case, run_subprocess

SUBPROCESS = ("yaml-indentation", "checkpoint-other-layout")
RESULTS: dict[str, bool] = {}


def test_there_are_at_least_30_cases() -> None:
    assert len(CASES) >= 30
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_malformed_input_in_process(case: Any, tmp_path: Path, figures: dict[str, Any]) -> None:
    problems = check_case(case, tmp_path)
    if problems is None:
        pytest.skip(f"{case.name}: cannot be set up on this machine")
    RESULTS[case.name] = not problems
    figures["malformed inputs with a clear error (in process)"] = f"{sum(RESULTS.values())}/{len(RESULTS)}"
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("name", SUBPROCESS)
def test_malformed_input_real_process(name: str, tmp_path: Path) -> None:
    """A few through the real command: the exit code and stderr the user sees."""
    case = next(c for c in CASES if c.name == name)
    problems = check_case(case, tmp_path, runner=run_subprocess)
    assert problems == [], "\n".join(problems or [])


def test_corrupt_league_json_is_kept_byte_for_byte(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.name == "league-json-corrupt")
    original = '{"players": {"main": {"rating": '
    assert check_case(case, tmp_path) == []
    assert (tmp_path / "run" / "league.json.bad").read_text() == original
