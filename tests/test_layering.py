"""The layer order holds at import time: the config and the learning algorithms do not load the physics engine.

``speedflip.config`` and ``speedflip.algos.*`` sit below ``speedflip.env`` in the layer order
(``_types/errors/device -> config -> env -> models -> algos -> ...``); a CartPole run, a config check or
an export must not pay for (or depend on) RocketSim. Each check runs in a fresh interpreter, because
the test process itself may already have imported the engine.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

LIGHT_MODULES = (
    "speedflip.env.registry",
    "speedflip.config",
    "speedflip.algos.ppo",
    "speedflip.algos.ppo_recurrent",
    "speedflip.algos.dqn",
    "speedflip.algos.normalize",
)


def _heavy_modules_after_import(module: str) -> list[str]:
    """Import ``module`` in a fresh interpreter; return the RocketSim modules it loaded."""
    code = textwrap.dedent(
        f"""
        import importlib, sys
        importlib.import_module({module!r})
        print(",".join(sorted(m for m in sys.modules if m == "RocketSim" or m.startswith("RocketSim."))))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"importing {module} failed:\n{done.stderr}"
    out = done.stdout.strip().splitlines()
    return [m for m in (out[-1].split(",") if out else []) if m]


@pytest.mark.parametrize("module", LIGHT_MODULES)
def test_module_does_not_import_rocketsim(module: str) -> None:
    loaded = _heavy_modules_after_import(module)
    assert not loaded, f"importing {module} loads the physics engine ({loaded}); it must stay RocketSim-free"


def test_light_setter_registry_matches_the_setters() -> None:
    """The config checks setters against :mod:`speedflip.env.registry`; the setters themselves agree with it."""
    import inspect

    from speedflip.env import registry, states

    assert tuple(states.STATE_SETTERS) == registry.STATE_SETTER_NAMES
    for name, fn in states.STATE_SETTERS.items():
        params = inspect.signature(fn).parameters.values()
        defaults = {p.name: p.default for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}
        assert defaults == registry.setter_options(name), name
    assert set(registry.MECHANICS_SETTERS) <= set(registry.STATE_SETTER_NAMES)


def test_setters_out_of_step_with_the_registry_are_refused() -> None:
    from speedflip.env import states

    def wall(arena: object, cars: object, rng: object, *, max_speed: float = 1.0) -> None:  # wrong default, option gone
        del arena, cars, rng

    drifted: dict[str, Any] = {**states.STATE_SETTERS, "wall": wall}
    with pytest.raises(RuntimeError, match="state setter 'wall' takes options"):
        states._check_matches_registry(drifted)
    with pytest.raises(RuntimeError, match=r"differ from speedflip\.env\.registry"):
        states._check_matches_registry({k: v for k, v in states.STATE_SETTERS.items() if k != "kickoff"})
