"""`speedflip components`: the library's registries, read at run time."""

from __future__ import annotations

import json

import numpy as np
import pytest

from speedflip.cli import main
from speedflip.components import CATEGORIES, list_components
from speedflip.env.obs import DefaultObs
from speedflip.env.rewards import REWARD_COMPONENTS, RewardContext
from speedflip.env.states import STATE_SETTERS


def _names(data: dict[str, list[dict[str, object]]], category: str) -> list[object]:
    return [item["name"] for item in data[category]]


def test_every_registered_component_is_listed_with_its_doc() -> None:
    data = list_components()
    assert set(CATEGORIES) <= set(data) and set(data["config_keys"]) == set(CATEGORIES)
    assert _names(data, "rewards") == list(REWARD_COMPONENTS)
    assert _names(data, "state_setters") == list(STATE_SETTERS)
    assert all(item["doc"] for item in data["rewards"] + data["state_setters"] + data["done_conditions"])
    assert {"goal_scored", "timeout", "no_touch_timeout"} <= set(_names(data, "done_conditions"))
    builders = {item["name"]: item for item in data["observation_builders"]}
    assert builders["default"]["obs_dim_1v1"] == DefaultObs(1, 1).obs_dim
    assert "advanced" in builders
    tables = {item["name"]: item for item in data["action_tables"]}
    assert tables["default"]["num_actions"] == 90
    assert "table" in _names(data, "action_forms")
    kinds = {item["name"]: item["kind"] for item in data["rewards"]}
    assert kinds["goal"] == "event" and kinds["face_ball"] == "shaping"


def test_components_added_at_run_time_show_up(monkeypatch: pytest.MonkeyPatch) -> None:
    def my_reward(ctx: RewardContext) -> np.ndarray:
        """A reward someone just added.

        More text that is not part of the one-line doc."""
        return np.zeros(ctx.touched.shape, np.float32)

    monkeypatch.setitem(REWARD_COMPONENTS, "my_reward", my_reward)
    monkeypatch.setitem(STATE_SETTERS, "my_setter", STATE_SETTERS["kickoff"])
    data = list_components()
    added = {item["name"]: item for item in data["rewards"]}["my_reward"]
    assert added["doc"] == "A reward someone just added."
    assert "my_setter" in _names(data, "state_setters")


def test_cli_prints_json_and_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["components", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert _names(data, "rewards") == list(REWARD_COMPONENTS)
    assert main(["components"]) == 0
    out = capsys.readouterr().out
    assert "velocity_ball_to_goal" in out and "kickoff" in out and "no_touch_timeout" in out
