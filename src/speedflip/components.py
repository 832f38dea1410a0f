"""What the environment library offers, read from its registries at run time (``speedflip components``).

Nothing here is a hard-coded list: rewards come from :data:`speedflip.env.rewards.REWARD_COMPONENTS`,
state setters from :data:`speedflip.env.states.STATE_SETTERS`, observation builders from the values
``env.obs_builder`` accepts (or an ``OBS_BUILDERS`` registry in :mod:`speedflip.env.obs`), done
conditions from the functions of :mod:`speedflip.env.conditions` (or its ``DONE_CONDITIONS``
registry), action tables from ``ACTION_TABLES`` in :mod:`speedflip.env.actions` when it exists.
A component added to a registry shows up without touching this file.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from speedflip.config import EnvConfig
from speedflip.env import actions as actions_mod
from speedflip.env import conditions as conditions_mod
from speedflip.env import obs as obs_mod
from speedflip.env import rewards as rewards_mod
from speedflip.env import states as states_mod

CATEGORIES = ("rewards", "observation_builders", "action_tables", "action_forms", "state_setters", "done_conditions")
CONFIG_KEYS = {
    "rewards": "env.rewards / env.reward_phases[].rewards (name: weight)",
    "observation_builders": "env.obs_builder",
    "action_tables": "the policy's discrete actions (Discrete(num_actions))",
    "action_forms": "speedflip.gym_env / parallel_env(action_space=...)",
    "state_setters": "env.state_setters / env.mechanics_setters (name: weight), env.state_setter_options",
    "done_conditions": "env.timeout_seconds, env.no_touch_timeout_seconds (goals always end an episode)",
}
ACTION_FORMS = {
    "discrete": "one lookup-table row index per agent (Discrete(num_actions)); what `speedflip train` learns",
    "continuous": "8 raw controls per agent (Box(8)): throttle, steer, pitch, yaw, roll in [-1, 1] (clamped), "
    "jump, boost, handbrake pressed above 0.5; NaN refused",
}


def one_line(obj: object) -> str:
    """The first paragraph of ``obj``'s docstring on one line ('' if it has none)."""
    doc = inspect.getdoc(obj) or ""
    return " ".join(doc.strip().split("\n\n", 1)[0].split())


def _registry(module: ModuleType, name: str) -> Mapping[str, Any] | None:
    """``module.<name>`` if that registry exists (others add registries as the library grows)."""
    value = vars(module).get(name)
    return value if isinstance(value, Mapping) else None


def _module_functions(module: ModuleType) -> dict[str, Callable[..., Any]]:
    return {
        name: func
        for name, func in inspect.getmembers(module, inspect.isfunction)
        if func.__module__ == module.__name__ and not name.startswith("_")
    }


def _keyword_options(func: Callable[..., Any]) -> dict[str, Any]:
    params = inspect.signature(func).parameters.values()
    return {p.name: p.default for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}


def rewards() -> list[dict[str, Any]]:
    """Every reward component with its one-line doc and kind (event components count in ``sparse`` mode)."""
    sparse = vars(rewards_mod).get("SPARSE_COMPONENTS", frozenset())
    return [
        {"name": name, "kind": "event" if name in sparse else "shaping", "doc": one_line(func)}
        for name, func in rewards_mod.REWARD_COMPONENTS.items()
    ]


def observation_builders() -> list[dict[str, Any]]:
    """Every observation builder with its doc and its size in 1v1 and 2v2 (default settings)."""
    registry = _registry(obs_mod, "OBS_BUILDERS")
    if registry is not None:
        builders = dict(registry)
    else:
        names = typing.get_args(EnvConfig.model_fields["obs_builder"].annotation)
        classes = {n.lower(): c for n, c in inspect.getmembers(obs_mod, inspect.isclass)}
        builders = {name: classes.get(f"{name}obs") for name in names}
    defaults = EnvConfig()
    out = []
    for name, builder in builders.items():
        sizes = {
            f"obs_dim_{b}v{o}": obs_mod.observation_size(name, b, o, 0, defaults.nearest_pads, 1)
            for b, o in ((1, 1), (2, 2), (3, 3))
        }
        out.append({"name": name, "doc": one_line(builder) if builder is not None else "", **sizes})
    return out


def action_tables() -> list[dict[str, Any]]:
    """Every lookup table with its size and coverage (controls it can reach)."""
    registry = _registry(actions_mod, "ACTION_TABLES")
    makers: Mapping[str, Any] = registry if registry is not None else {"default": actions_mod.default_lookup_table}
    out = []
    for name, make in makers.items():
        table = actions_mod.LookupTableAction(make() if callable(make) else make)
        out.append(
            {
                "name": name,
                "num_actions": table.num_actions,
                "doc": one_line(make),
                "coverage": table.coverage.summary(),
            }
        )
    return out


def action_forms() -> list[dict[str, Any]]:
    """The forms an action can take (``ACTION_FORMS`` in :mod:`speedflip.env.actions` when it exists)."""
    registry = _registry(actions_mod, "ACTION_FORMS")
    forms = registry if registry is not None else ACTION_FORMS
    return [{"name": name, "doc": doc if isinstance(doc, str) else one_line(doc)} for name, doc in forms.items()]


def state_setters() -> list[dict[str, Any]]:
    """Every state setter with its doc, whether it is in the default mechanics mix, and its options."""
    mechanics = set(vars(states_mod).get("MECHANICS_SETTERS", ()))
    return [
        {"name": name, "mechanics": name in mechanics, "doc": one_line(func), "options": _keyword_options(func)}
        for name, func in states_mod.STATE_SETTERS.items()
    ]


def done_conditions() -> list[dict[str, Any]]:
    """Every done condition (goal: terminal; time limits: truncation) with its doc."""
    registry = _registry(conditions_mod, "DONE_CONDITIONS")
    funcs = dict(registry) if registry is not None else _module_functions(conditions_mod)
    return [{"name": name, "doc": one_line(func)} for name, func in funcs.items()]


def list_components() -> dict[str, Any]:
    """Everything, by category, plus the config key that selects each category."""
    return {
        "rewards": rewards(),
        "observation_builders": observation_builders(),
        "action_tables": action_tables(),
        "action_forms": action_forms(),
        "state_setters": state_setters(),
        "done_conditions": done_conditions(),
        "config_keys": dict(CONFIG_KEYS),
    }


def print_components(data: Mapping[str, Any], console: Any) -> None:
    """One rich table per category."""
    from rich.markup import escape
    from rich.table import Table

    for category in CATEGORIES:
        table = Table(title=f"{category.replace('_', ' ')}  [dim]({data['config_keys'][category]})[/dim]")
        table.add_column("name", style="bold")
        table.add_column("details")
        for item in data[category]:
            extras = [
                f"{k}={v}" for k, v in item.items() if k not in ("name", "doc") and v not in ({}, None, False, "")
            ]
            details = escape(item["doc"]) + (f"  [dim]{escape('; '.join(extras))}[/dim]" if extras else "")
            table.add_row(item["name"], details)
        console.print(table)


__all__ = ["CATEGORIES", "list_components", "one_line", "print_components"]
