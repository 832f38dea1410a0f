"""Ray is optional: without it ``run.collector: ray`` says how to install it, and nothing of Ray is
imported on the default path (these tests run with or without the ``ray`` extra)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from typing import Any

import pytest

import speedflip.collect as collect
from speedflip.config import ConfigError, resolve_config

TINY = ["env.num_arenas=2", "ppo.minibatch_size=64", "ppo.policy_layers=[16]", "ppo.critic_layers=[16]"]


def test_without_ray_the_ray_collector_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "ray" else real(name, *args)

    monkeypatch.setattr(collect.importlib.util, "find_spec", find_spec)
    cfg = resolve_config("quick", overrides=[*TINY, "run.collector=ray"])
    with pytest.raises(ConfigError, match=r"needs Ray, an optional extra: pip install 'speedflip\[ray\]'"):
        collect.check_collector(cfg)


def test_the_ray_collector_refuses_what_its_actors_cannot_send_here() -> None:
    cfg = resolve_config("quick", overrides=[*TINY, "run.collector=ray"])
    with pytest.raises(ConfigError, match=r"run\.collector=ray cannot drive --render \(RLViser is sent the arena "
                       r"state, which stays in the Ray actors\): set run\.collector=inprocess"):  # fmt: skip
        collect.check_collector(cfg, render=True)
    assert collect.CAPABILITIES["ray"].rule_bot and collect.CAPABILITIES["ray"].action_masks


@pytest.mark.parametrize("address", ["", "auto", "10.0.0.5:6379", "head-node.lan:6379"])
def test_ray_addresses(address: str) -> None:
    assert resolve_config("quick", overrides=[f"run.ray_address={address}"]).run.ray_address == address


def test_a_bad_ray_address_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"run\.ray_address"):
        resolve_config("quick", overrides=["run.ray_address=http://head"])


def test_the_default_path_imports_nothing_of_ray() -> None:
    code = (
        "import sys, speedflip.cli, speedflip.train.run, speedflip.train.trainer, speedflip.collect, speedflip.bench\n"
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
