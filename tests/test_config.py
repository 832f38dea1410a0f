"""Config: presets, YAML files, --set overrides and the messages for every kind of mistake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from speedflip.config import (
    Config,
    ConfigError,
    apply_overrides,
    build_config,
    config_to_dict,
    load_file,
    load_preset,
    parse_override,
    preset_names,
    resolve_config,
)


def _error(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        build_config(data)
    return str(info.value)


# ---------------------------------------------------------------------- presets
def test_shipped_presets() -> None:
    names = preset_names()
    assert {"1v1", "2v2", "quick", "phases"} <= set(names)
    assert names == sorted(names)
    for name in names:  # every shipped preset validates
        build_config(load_preset(name), f"preset '{name}'")


@pytest.mark.parametrize(
    ("name", "teams", "arenas", "layers"),
    [("quick", (1, 1), 32, [256, 256]), ("1v1", (1, 1), 64, [256, 256, 256]), ("2v2", (2, 2), 32, [256, 256, 256])],
)
def test_presets_load_and_validate(name: str, teams: tuple[int, int], arenas: int, layers: list[int]) -> None:
    cfg = build_config(load_preset(name), f"preset '{name}'")
    assert (cfg.env.blue_size, cfg.env.orange_size) == teams
    assert cfg.env.num_arenas == arenas
    assert cfg.ppo.policy_layers == cfg.ppo.critic_layers == layers
    assert cfg.ppo.minibatch_size <= cfg.batch_size
    assert cfg.batch_size == arenas * sum(teams) * cfg.ppo.num_steps
    # the resolved config survives a round trip through its JSON form
    assert build_config(config_to_dict(cfg)) == cfg


def test_resolve_defaults_to_quick() -> None:
    assert resolve_config() == resolve_config("quick")
    assert resolve_config().run.total_steps == 2_500_000


def test_unknown_preset_lists_available() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_config("quik")
    message = str(info.value)
    assert "unknown preset 'quik'" in message
    assert f"Available presets: {', '.join(preset_names())}." in message
    assert "Did you mean 'quick'?" in message
    with pytest.raises(ConfigError, match=r"Available presets: 1v1, .*quick\.$"):
        load_preset("zzz")


# ---------------------------------------------------------------------- YAML files
def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("env:\n  num_arenas: 4\n   tick_skip: 8\nppo: {}\n")  # line 3 is mis-indented
    with pytest.raises(ConfigError) as info:
        load_file(path)
    message = str(info.value)
    assert str(path) in message and "not valid YAML" in message
    assert "line 3" in message


def test_yaml_that_is_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match=r"must hold a mapping .* not list"):
        load_file(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_config(config_file=tmp_path / "nope.yaml")


def test_file_with_explicit_preset(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing\n")
    assert resolve_config("quick", path) == resolve_config("quick")


def test_config_file_alone_applies_over_the_default_preset(tmp_path: Path) -> None:
    # `speedflip train --config mine.yaml`: --help says the file is applied over the preset (default quick)
    path = tmp_path / "mine.yaml"
    path.write_text("ppo:\n  learning_rate: 0.0001\n")
    cfg = resolve_config(config_file=path)
    assert cfg.ppo.learning_rate == pytest.approx(1e-4)
    assert cfg.env.num_arenas == resolve_config("quick").env.num_arenas


def test_defaults_are_valid() -> None:
    assert Config().ppo.minibatch_size <= Config().batch_size


def test_file_over_preset_merges_sections_but_replaces_reward_tables(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("env:\n  num_arenas: 8\n  rewards: {touch: 2.0}\nppo:\n  minibatch_size: 512\n")
    cfg = resolve_config("quick", path)
    assert cfg.env.num_arenas == 8
    assert cfg.env.tick_skip == 8  # kept from the preset
    assert cfg.env.rewards == {"touch": 2.0}  # a reward table is replaced, not merged
    assert cfg.ppo.minibatch_size == 512 and cfg.ppo.num_steps == 128


# ---------------------------------------------------------------------- validation messages
def test_unknown_key_suggests_the_right_one() -> None:
    message = _error({"ppo": {"lerning_rate": 1e-3}})
    assert "unknown key 'ppo.lerning_rate'" in message
    assert "Did you mean 'ppo.learning_rate'?" in message
    assert "ppo.num_steps" in message  # lists what is allowed in that section


def test_unknown_section() -> None:
    message = _error({"pppo": {}})
    assert "unknown key 'pppo'" in message and "env, ppo, run" in message


def test_wrong_type_names_key_and_value() -> None:
    message = _error({"ppo": {"learning_rate": "abc"}})
    assert "'ppo.learning_rate'" in message and "'abc'" in message
    assert "valid number" in message


def test_out_of_range_names_key_and_value() -> None:
    message = _error({"env": {"tick_skip": 0}})
    assert "'env.tick_skip'" in message and "bad value 0" in message
    assert "greater than or equal to 1" in message


def test_unknown_reward_component() -> None:
    message = _error({"env": {"rewards": {"goals": 1.0}}})
    assert "'env.rewards'" in message and "['goals']" in message
    assert "face_ball" in message and "velocity_ball_to_goal" in message  # the available ones


def test_unknown_state_setter_and_zero_weights() -> None:
    assert "['teleport']" in _error({"env": {"state_setters": {"teleport": 1.0}}})
    assert "at least one > 0" in _error({"env": {"state_setters": {"kickoff": 0.0}}})


def test_minibatch_larger_than_batch_is_a_cross_field_message() -> None:
    message = _error({"env": {"num_arenas": 2}, "ppo": {"num_steps": 8, "minibatch_size": 64}})
    # 2 arenas x 2 cars (1v1) x 8 steps = 32
    assert "ppo.minibatch_size (64) is larger than the rollout batch (32" in message
    assert "env.num_arenas 2" in message and "ppo.num_steps 8" in message


def test_one_tick_skip_with_action_delay_is_allowed() -> None:
    cfg = resolve_config("quick", overrides=["env.tick_skip=1", "env.action_delay_ticks=1"])
    assert (cfg.env.tick_skip, cfg.env.action_delay_ticks) == (1, 1)
    assert "'env.action_delay_ticks'" in _error({"env": {"action_delay_ticks": 2}})


def test_bad_layers_and_device() -> None:
    assert "non-empty list of positive integers" in _error({"ppo": {"policy_layers": []}})
    assert "non-empty list of positive integers" in _error({"ppo": {"critic_layers": [16, 0]}})
    assert "'run.device'" in _error({"run": {"device": "gpu"}})


def test_several_errors_are_all_reported() -> None:
    message = _error({"ppo": {"gamma": 2.0, "clip_coef": -1}})
    assert "'ppo.gamma'" in message and "'ppo.clip_coef'" in message


def test_config_is_validated_on_assignment() -> None:
    cfg = resolve_config("quick")
    with pytest.raises(ValueError):
        cfg.ppo.learning_rate = -1.0


# ---------------------------------------------------------------------- --set
@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("ppo.num_steps=32", ["ppo", "num_steps"], 32),
        ("ppo.learning_rate=0.001", ["ppo", "learning_rate"], 0.001),
        ("ppo.learning_rate=1.0e-4", ["ppo", "learning_rate"], 1.0e-4),
        ("ppo.policy_layers=[16, 32]", ["ppo", "policy_layers"], [16, 32]),
        ("ppo.norm_adv=false", ["ppo", "norm_adv"], False),
        ("ppo.norm_adv=true", ["ppo", "norm_adv"], True),
        ("ppo.target_kl=null", ["ppo", "target_kl"], None),
        ("env.rewards={goal: 1, touch: 0.5}", ["env", "rewards"], {"goal": 1, "touch": 0.5}),
        (" run.owner = alice", ["run", "owner"], "alice"),
        ("run.owner=a=b", ["run", "owner"], "a=b"),
        ("run.owner=", ["run", "owner"], ""),
        ("x=[1,", ["x"], "[1,"),  # not YAML: kept as text (validation then says what is wrong)
    ],
)
def test_parse_override(text: str, key: list[str], value: object) -> None:
    parsed_key, parsed_value = parse_override(text)
    assert parsed_key == key
    assert parsed_value == value
    assert type(parsed_value) is type(value)


@pytest.mark.parametrize("text", ["novalue", "=3", "...=3"])
def test_bad_override_syntax(text: str) -> None:
    with pytest.raises(ConfigError, match="--set"):
        parse_override(text)


def test_overrides_apply_over_preset() -> None:
    cfg = resolve_config(
        "quick",
        overrides=[
            "env.num_arenas=4",
            "env.rewards.goal=2",  # one entry of the table; the others stay
            "ppo.minibatch_size=64",
            "ppo.learning_rate=1e-4",  # YAML 1.1 reads '1e-4' as text; the float field still accepts it
            "ppo.policy_layers=[16]",
            "ppo.anneal_lr=yes",
            "ppo.lr_target_kl=null",  # quick adapts its rate; annealing replaces that (both: an error)
            "run.seed=3",
        ],
    )
    assert cfg.env.num_arenas == 4
    assert cfg.env.rewards["goal"] == 2.0 and cfg.env.rewards["touch"] == 1.0
    assert cfg.ppo.learning_rate == pytest.approx(1e-4)
    assert isinstance(cfg.ppo.learning_rate, float)
    assert cfg.ppo.policy_layers == [16] and cfg.ppo.critic_layers == [256, 256]
    assert cfg.ppo.anneal_lr is True
    assert cfg.run.seed == 3


def test_apply_overrides_does_not_modify_its_input() -> None:
    data = {"ppo": {"num_steps": 8}}
    out = apply_overrides(data, ["ppo.num_steps=16", "run.seed=1"])
    assert data == {"ppo": {"num_steps": 8}}
    assert out == {"ppo": {"num_steps": 16}, "run": {"seed": 1}}


def test_override_errors_name_the_source() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_config("quick", overrides=["ppo.lerning_rate=1"])
    assert "preset 'quick' + --set" in str(info.value)
    assert "Did you mean 'ppo.learning_rate'?" in str(info.value)


def test_set_indexes_lists() -> None:
    """A number in a --set path indexes a list; an index past the end names the list and its size."""
    cfg = resolve_config("phases", overrides=["env.reward_phases.1.until_steps=123"])
    assert cfg.env.reward_phases[1].until_steps == 123
    assert cfg.env.reward_phases[0].until_steps == 10_000_000
    with pytest.raises(ConfigError, match=r"'env.reward_phases' is a list of 4 items; use an index 0..3"):
        resolve_config("phases", overrides=["env.reward_phases.9.until_steps=1"])


# ---------------------------------------------------------------------- hardening (fault-tolerance issue)
@pytest.mark.parametrize(
    ("override", "key", "text"),
    [
        ("env.rewards.goal=.nan", "env.rewards", "'goal' is nan"),
        ("env.rewards.touch=.inf", "env.rewards", "'touch' is inf"),
        ("env.state_setters.kickoff=.nan", "env.state_setters", "finite"),
        ("ppo.ent_coef=.inf", "ppo.ent_coef", "NaN and Inf are not allowed"),
        ("ppo.learning_rate=.nan", "ppo.learning_rate", "bad value nan"),
        ("env.timeout_seconds=.inf", "env.timeout_seconds", "finite"),
        ("selfplay.k_factor=.nan", "selfplay.k_factor", "bad value nan"),
        ("ppo.gamma=0", "ppo.gamma", "greater than 0"),
        ("run.seed=4294967296", "run.seed", "less than or equal to 4294967295"),
        ("ppo.policy_layers=[100000]", "ppo.policy_layers", "at most 65536"),
        ("recurrent.encoder_layers=[0]", "recurrent.encoder_layers", "positive integers"),
        ("dqn.batch_size=200000", "dqn", "batch_size (200000) is larger than buffer_size (100000)"),
        ("run.owner=", "run.owner", "at least 1 character"),
    ],
)
def test_new_ranges_and_finite_numbers(override: str, key: str, text: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_config("quick", overrides=[override])
    message = str(info.value)
    assert f"key '{key}'" in message and text in message, message


def test_reward_phases_must_be_able_to_advance() -> None:
    phases = [
        {"name": "a", "rewards": {"touch": 1.0}},  # no until_*: phase b could never start
        {"name": "b", "rewards": {"goal": 1.0}},
    ]
    message = _error({"env": {"reward_phases": phases}})
    assert "key 'env.reward_phases'" in message and "reward phase 'a' is not the last one" in message
    phases[0]["until_steps"] = 1000
    assert build_config({"env": {"reward_phases": phases}}).env.reward_phases[0].until_steps == 1000
    assert "at least 1 character" in _error({"env": {"reward_phases": [{"name": "", "rewards": {}}]}})


def test_curriculum_stage_names_are_unique() -> None:
    stages = [
        {"name": "s", "blue_size": 1, "orange_size": 1, "until_steps": 100},
        {"name": "s", "blue_size": 2, "orange_size": 2},
    ]
    message = _error({"curriculum": {"enabled": True, "stages": stages}})
    assert "key 'curriculum.stages'" in message and "stage names must be unique" in message


def test_gym_env_kwargs_may_hold_any_number() -> None:
    cfg = build_config(
        {"gym": {"env_id": "CartPole-v1", "env_kwargs": {"limit": float("inf")}}, "ppo": {"minibatch_size": 64}}
    )
    assert cfg.gym.env_kwargs["limit"] == float("inf")


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"gym": {"env_id": "CartPole-v1"}, "ppo": {"minibatch_size": 64}}, "a Gymnasium environment"),
        ({"algo": "ppo_recurrent"}, "algo=ppo_recurrent"),
        ({"env": {"action_form": "continuous"}, "selfplay": {"opponent_share": 0.0}}, "env.action_form=continuous"),
        ({"env": {"action_masking": True}}, "env.action_masking=true"),
    ],
)
def test_kickstart_needs_feed_forward_ppo_on_the_table(overrides: dict[str, Any], named: str) -> None:
    raw = {**overrides, "ppo": {**overrides.get("ppo", {}), "kickstart_coef": 1.0}}
    with pytest.raises(ConfigError, match=rf"kickstart_coef=1 \(kickstarting from the rule bot\).*not {named}.*"
                                          r"set ppo\.kickstart_coef=0"):  # fmt: skip
        build_config(raw)
    build_config({**overrides, "ppo": {**overrides.get("ppo", {}), "kickstart_coef": 0.0}})  # fine when off
