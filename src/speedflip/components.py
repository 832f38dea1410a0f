"""What the environment library offers, read from its registries at run time (``speedflip components``).

Nothing here is a hard-coded list: rewards come from :data:`speedflip.env.rewards.REWARD_COMPONENTS`,
state setters from :data:`speedflip.env.states.STATE_SETTERS`, observation builders from the values
``env.obs_builder`` accepts (or an ``OBS_BUILDERS`` registry in :mod:`speedflip.env.obs`), done
conditions from the functions of :mod:`speedflip.env.conditions` (or its ``DONE_CONDITIONS``
registry), action forms and tables from the values ``env.action_form`` accepts and the tables
``env.action_table`` can build (or ``ACTION_FORMS`` / ``ACTION_TABLES`` in :mod:`speedflip.env.actions`).
A component added to a registry shows up without touching this file.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from pydantic import BaseModel

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
    "action_tables": "env.action_table (bins; unset = the default table)",
    "action_forms": "env.action_form; the Gymnasium/PettingZoo faces: action_space='discrete' or 'continuous'",
    "state_setters": "env.state_setters / env.mechanics_setters (name: weight), env.state_setter_options",
    "done_conditions": "env.timeout_seconds, env.no_touch_timeout_seconds (goals always end an episode)",
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


def _literal_values(field: str) -> tuple[str, ...]:
    """The names an ``EnvConfig`` field of ``Literal`` type accepts (empty if there is no such field)."""
    info = EnvConfig.model_fields.get(field)
    return () if info is None else tuple(a for a in typing.get_args(info.annotation) if isinstance(a, str))


def _action_forms_module() -> ModuleType | None:
    try:
        return importlib.import_module("speedflip.env.action_forms")
    except ModuleNotFoundError:  # an older tree without the extra action forms
        return None


def _maker(value: Any) -> Callable[[], Any]:
    """A registry entry is a table or a function that makes one."""
    if callable(value):
        return value  # type: ignore[no-any-return]
    return lambda: value


def action_tables() -> list[dict[str, Any]]:
    """Every lookup table with its size and coverage (controls it can reach)."""
    registry = _registry(actions_mod, "ACTION_TABLES")
    makers: dict[str, tuple[Any, Callable[[], Any]]] = {}
    if registry is not None:
        makers = {name: (make, _maker(make)) for name, make in registry.items()}
    else:
        makers["default"] = (actions_mod.default_lookup_table, actions_mod.default_lookup_table)
        forms = _action_forms_module()
        info = EnvConfig.model_fields.get("action_table")
        build = vars(forms).get("build_table") if forms is not None else None
        annotation = info.annotation if info is not None else None
        models = [a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
        if callable(build) and models:
            makers["bins"] = (build, lambda: build(**models[0]().model_dump()))  # env.action_table, its defaults
    out: list[dict[str, Any]] = []
    for name, (documented, make) in makers.items():
        try:
            table = actions_mod.LookupTableAction(make())
        except actions_mod.ActionError as err:
            out.append({"name": name, "doc": one_line(documented), "invalid": str(err)})
            continue
        summary = table.coverage.summary()
        out.append({"name": name, "num_actions": table.num_actions, "doc": one_line(documented), "coverage": summary})
    return out


def action_forms() -> list[dict[str, Any]]:
    """The forms a policy's action can take (the values ``env.action_form`` accepts), with their docs."""
    registry = _registry(actions_mod, "ACTION_FORMS")
    if registry is not None:
        return [{"name": n, "doc": d if isinstance(d, str) else one_line(d)} for n, d in registry.items()]
    forms = _action_forms_module()
    info = EnvConfig.model_fields.get("action_form")
    out = []
    for name in _literal_values("action_form") or ("table",):
        func = actions_mod.LookupTableAction if name == "table" else None
        if func is None and forms is not None:
            func = vars(forms).get(f"controls_from_{name}")
        doc = one_line(func) if func is not None else (info.description or "" if info is not None else "")
        out.append({"name": name, "doc": doc})
    return out


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
