"""The layer order holds at import time: the config and the learning algorithms do not load the physics engine.

``speedflip.config`` and ``speedflip.algos.*`` sit below ``speedflip.env`` in the layer order
(``_types/errors/device -> config -> env -> models -> algos -> ...``); a CartPole run, a config check or
an export must not pay for (or depend on) RocketSim. Each check runs in a fresh interpreter, because
the test process itself may already have imported the engine.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

LIGHT_MODULES = (
    "speedflip.registry",
    "speedflip.config",
    "speedflip.algos.ppo",
    "speedflip.algos.ppo_recurrent",
    "speedflip.algos.dqn",
    "speedflip.algos.normalize",
    "speedflip.algos.guards",
    "speedflip.algos.ppo_learner",
    "speedflip.rollout",
    "speedflip.schedule",
    "speedflip.checkpoint",
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
    """The config checks setters against :mod:`speedflip.registry`; the setters themselves agree with it."""
    import inspect

    from speedflip import registry
    from speedflip.env import states

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
    with pytest.raises(RuntimeError, match=r"differ from speedflip\.registry"):
        states._check_matches_registry({k: v for k, v in states.STATE_SETTERS.items() if k != "kickoff"})


# ---------------------------------------------------------------------- the layer order of every import
LAYERS: tuple[tuple[str, ...], ...] = (
    ("speedflip._types", "speedflip.errors", "speedflip.device", "speedflip.jsonsafe", "speedflip.registry"),
    ("speedflip.config", "speedflip.provenance"),
    ("speedflip.rollout", "speedflip.checkpoint", "speedflip.schedule"),
    ("speedflip.env", "speedflip.gym.envs", "speedflip.gym.errors"),
    ("speedflip.components",),
    ("speedflip.models",),
    ("speedflip.accel", "speedflip.algos"),
    ("speedflip.selfplay", "speedflip.gym.agents"),
    ("speedflip.collect", "speedflip.faces", "speedflip.gym", "speedflip.gym.evaluate"),
    ("speedflip.doctor", "speedflip.watch"),
    ("speedflip.train", "speedflip.gym.run", "speedflip.gym.cli"),
    ("speedflip.export",),
    ("speedflip.bench",),
    ("speedflip.cli", "speedflip.__main__"),
)
"""Bottom up; a module may import its own layer and the ones below (docs/architecture.md shows it)."""


def layer_of(module: str) -> int | None:
    """The layer of ``module`` (the longest matching prefix wins); None for the package root."""
    best: tuple[int, int] | None = None
    for index, group in enumerate(LAYERS):
        for prefix in group:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return None if best is None else best[1]


def _imports(path: Path) -> list[str]:
    """Every ``speedflip.*`` module ``path`` imports, at any depth (lazy imports in functions too), except
    those only for type checking and the package root's ``__version__``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(child) for child in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module != "speedflip":
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return [name for name in found if name.startswith("speedflip.")]


def test_no_import_runs_back_up_the_layer_order() -> None:
    src = Path(__file__).resolve().parents[1] / "src" / "speedflip"
    upward, unplaced = [], []
    for path in sorted(src.rglob("*.py")):
        module = ".".join(("speedflip", *path.relative_to(src).with_suffix("").parts)).removesuffix(".__init__")
        if module == "speedflip":
            continue  # the package root only re-exports conveniences, lazily
        own = layer_of(module)
        if own is None:
            unplaced.append(module)
            continue
        for target in _imports(path):
            theirs = layer_of(target)
            if theirs is None:
                unplaced.append(target)
            elif theirs > own:
                upward.append(f"{module} (layer {own}) imports {target} (layer {theirs})")
    assert not unplaced, f"modules without a layer in LAYERS: {sorted(set(unplaced))}"
    assert not upward, "imports that run back up the layer order:\n" + "\n".join(upward)


def test_the_layer_check_can_fail() -> None:
    assert layer_of("speedflip.train.loop") == layer_of("speedflip.train")
    assert layer_of("speedflip.gym.envs") == layer_of("speedflip.env") < layer_of("speedflip.gym.run")  # type: ignore[operator]
    assert layer_of("speedflip.config") < layer_of("speedflip.env")  # type: ignore[operator]


def test_a_gymnasium_run_does_not_load_the_physics_engine() -> None:
    for module in ("speedflip.gym.run", "speedflip.train.loop", "speedflip.collect.gym_collector"):
        assert _heavy_modules_after_import(module) == [], module
