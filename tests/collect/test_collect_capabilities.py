"""Backends declare what they can drive; a config is checked against them when it is resolved.

``auto`` on many cores picks worker processes only when they can drive everything the config needs (so a
config that runs on 2 cores runs on 64); an explicit ``run.collector: multiprocess`` that cannot is a
``ConfigError`` naming the setting and both fixes, raised by ``speedflip train`` before a run dir exists.
The expected answers are written out by hand from the capability table in ``speedflip.collect``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from speedflip.collect import (
    CAPABILITIES,
    check_collector,
    choose_collector,
    missing_capabilities,
    required_capabilities,
)
from speedflip.config import Config, ConfigError, apply_overrides, build_config, config_to_dict


def config(algo: str = "ppo", /, **sections: dict[str, Any]) -> Config:
    data: dict[str, Any] = {"algo": algo, "env": {"num_arenas": 64}, "ppo": {"minibatch_size": 64}, "run": {}}
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    return build_config(data)


def test_the_backends_declare_what_they_drive() -> None:
    inproc, multi = CAPABILITIES["inprocess"], CAPABILITIES["multiprocess"]
    assert inproc.names() == [
        "continuous_actions", "multi_discrete_actions", "action_masks", "rule_bot", "recurrent", "render", "rlgym",
    ]  # fmt: skip
    assert multi.names() == ["action_masks", "rule_bot", "recurrent"]  # the arena state is in shared memory


def test_a_plain_table_config_needs_nothing_special() -> None:
    cfg = config()  # default: table form, no masks, pure self-play (opponent_share 0), no rlgym
    assert required_capabilities(cfg) == []
    plan = choose_collector(cfg, cores=64)
    assert plan.backend == "multiprocess"
    assert plan.num_workers == 64  # one per core, 64 arenas
    assert plan.reason == "auto: 64 cores >= 4: worker processes scale with cores"


@pytest.mark.parametrize(
    ("sections", "setting"),
    [
        ({"env": {"action_form": "continuous"}}, "env.action_form=continuous"),
        ({"env": {"action_form": "multi_discrete"}}, "env.action_form=multi_discrete"),
    ],
)
def test_auto_on_64_cores_stays_in_process_for_what_workers_cannot_drive(
    sections: dict[str, dict[str, Any]], setting: str
) -> None:
    plan = choose_collector(config(**sections), cores=64)
    assert plan.backend == "inprocess"
    assert plan.num_workers == 0 and plan.physics_threads == 64
    assert plan.reason.startswith(f"auto: 64 cores, but worker processes cannot drive {setting} (")
    assert plan.reason.endswith(": in-process threads")
    # and on 2 cores it was in-process anyway, for the core count
    assert choose_collector(config(**sections), cores=2).reason.startswith("auto: 2 cores < 4")


@pytest.mark.parametrize(
    "sections",
    [
        {"env": {"action_masking": True}},
        {"selfplay": {"opponent_share": 0.25}},
        {"ppo": {"minibatch_size": 64, "kickstart_coef": 0.5}},
    ],
)
def test_what_reads_the_arena_state_runs_beside_worker_processes(sections: dict[str, dict[str, Any]]) -> None:
    # masks, the rule bot in the pool and the kickstart's labels read the state the workers publish
    assert required_capabilities(config(**sections)) != []
    assert choose_collector(config(**sections), cores=64).backend == "multiprocess"


def test_the_rule_bot_counts_only_where_it_can_play() -> None:
    # left out of the pool, or no pool arenas: snapshots only, which worker processes can drive
    assert choose_collector(config(selfplay={"opponent_share": 0.5, "include_rule": False}), cores=64).backend == (
        "multiprocess"
    )
    # round(0.005 * 64) = 0 pool arenas: the rule bot never plays
    assert required_capabilities(config(selfplay={"opponent_share": 0.005})) == []
    # a curriculum stage against the pool (the default curriculum's second stage, share 1.0) needs it
    curriculum = config(curriculum={"enabled": True})
    (need,) = required_capabilities(curriculum)
    assert need.capability == "rule_bot"
    assert need.setting == "selfplay.include_rule=true with curriculum.stages[1].opponent_share=1"
    assert choose_collector(curriculum, cores=64).backend == "multiprocess"  # which workers drive now


def test_recurrent_runs_in_worker_processes() -> None:
    cfg = config("ppo_recurrent", ppo={"num_steps": 32})
    assert [r.capability for r in required_capabilities(cfg)] == ["recurrent"]
    assert missing_capabilities("multiprocess", required_capabilities(cfg)) == []
    assert choose_collector(cfg, cores=64).backend == "multiprocess"


def test_explicit_multiprocess_that_cannot_drive_the_config_is_refused() -> None:
    cfg = config(env={"action_form": "continuous"}, run={"collector": "multiprocess"})
    with pytest.raises(ConfigError) as err:
        check_collector(cfg, cores=64)
    assert str(err.value) == (
        "run.collector=multiprocess cannot drive env.action_form=continuous (worker processes step lookup-table "
        "indices only): set run.collector=inprocess or env.action_form=table"
    )
    masks = config(env={"action_masking": True}, selfplay={"opponent_share": 1.0}, run={"collector": "multiprocess"})
    assert choose_collector(masks, cores=2).backend == "multiprocess"  # the state is in shared memory
    with pytest.raises(ConfigError, match=r"cannot drive --render .*leave out --render"):
        check_collector(config(run={"collector": "multiprocess"}), render=True)
    # two missing capabilities: both named
    both = config(env={"action_form": "multi_discrete"}, run={"collector": "multiprocess"})
    with pytest.raises(ConfigError, match=r"multi_discrete.*; run\.collector=multiprocess cannot drive --render"):
        check_collector(both, render=True)
    # what it can drive passes, and in-process drives everything
    assert check_collector(config(run={"collector": "multiprocess"}), cores=64).backend == "multiprocess"
    inproc = config(env={"action_form": "continuous"}, run={"collector": "inprocess"})
    assert check_collector(inproc, render=True, cores=64).backend == "inprocess"


def test_train_refuses_before_a_run_dir_exists(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    argv = [
        sys.executable, "-m", "speedflip.cli", "train", "--preset", "quick", "--run-dir", str(run_dir),
        "--set", "run.collector=multiprocess", "--set", "env.action_form=continuous",
        "--set", "run.total_steps=64", "--set", "env.num_arenas=2", "--set", "ppo.num_steps=16",
        "--set", "ppo.minibatch_size=32", "--set", "ppo.policy_layers=[16]", "--set", "ppo.critic_layers=[16]",
        "--set", "run.tensorboard=false", "--set", "ppo.kickstart_coef=0",
    ]  # fmt: skip
    env = {**os.environ, "COLUMNS": "400", "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "run.collector=multiprocess cannot drive env.action_form=continuous" in out
    assert "set run.collector=inprocess or env.action_form=table" in out
    assert "Traceback" not in out
    assert not run_dir.exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "sections",
    [
        {"env": {"action_form": "continuous"}},
        {"env": {"action_form": "multi_discrete"}},
    ],
)
def test_following_the_refusals_fix_gives_a_config_workers_drive(sections: dict[str, dict[str, Any]]) -> None:
    # the `1v1` preset's pair (the rule bot in half the arenas, the kickstart) needs no fix any more
    preset_pair = {"selfplay": {"opponent_share": 0.5, "rule_share": 1.0}, "ppo": {"kickstart_coef": 0.5}}
    assert check_collector(config(**preset_pair, run={"collector": "multiprocess"}), cores=64).backend == (
        "multiprocess"
    )
    refused = config(**sections, run={"collector": "multiprocess"})
    missing = missing_capabilities("multiprocess", required_capabilities(refused))
    assert missing
    fixed = apply_overrides(config_to_dict(refused), [o for r in missing for o in r.overrides])
    assert check_collector(build_config(fixed), cores=64).backend == "multiprocess"


def test_the_rule_bot_fix_names_both_settings_when_a_share_is_fixed() -> None:
    (need,) = required_capabilities(config(selfplay={"opponent_share": 0.5, "rule_share": 1.0}))
    assert need.turn_off == "selfplay.include_rule=false with selfplay.rule_share=null"
    assert need.overrides == ("selfplay.include_rule=false", "selfplay.rule_share=null")
    # nothing to set for --render: no overrides, the message says what to do
    (render,) = required_capabilities(config(), render=True)
    assert render.overrides == ()
