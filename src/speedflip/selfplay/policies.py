"""Policies that can drive cars in a match: trained checkpoints, the rule bot, random, idle.

Every policy maps ``(obs [N, D], state, car_teams)`` to lookup-table indices ``[N]`` for all
agents; a match then takes the rows that belong to each side. The indices refer to the policy's
``table``: a checkpoint's policy acts in the table of the config it was trained with; ``None`` means
the table of the env it plays in (built-in policies made for that env). How a match handles players
with different tables: :mod:`speedflip.selfplay.match`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from safetensors.torch import load_file

from speedflip._types import Array
from speedflip.algos.normalize import RunningMeanStd
from speedflip.checkpoint import CheckpointError, list_checkpoints, to_numpy_dict, verify_checkpoint
from speedflip.env.action_forms import same_table, table_from_run_config
from speedflip.env.actions import ActionError
from speedflip.env.arenas import GameArrays
from speedflip.models.build import ActingMemory, model_from_compat
from speedflip.models.mlp import ActorCritic
from speedflip.selfplay.best import BEST_FILE, best_checkpoint
from speedflip.selfplay.rule_policy import RulePolicy


class Policy(Protocol):
    """Anything that picks an action index for every agent."""

    name: str

    @property
    def table(self) -> Array | None:
        """The lookup table the indices refer to; ``None``: the env's own table."""
        ...

    def act(self, obs: Array, state: GameArrays, car_teams: Array) -> Array: ...

    def reset(self, rows: Array) -> None:
        """The episodes of agents ``rows`` ended: a recurrent policy forgets them (others: nothing)."""
        ...


@dataclass
class IdlePolicy:
    """Never touches the controls (the all-zero table row)."""

    neutral_index: int
    name: str = "idle"
    table: Array | None = None  # the table neutral_index refers to (None: the env's)

    def act(self, obs: Array, state: GameArrays, car_teams: Array) -> Array:
        return np.full(obs.shape[0], self.neutral_index, np.int64)

    def reset(self, rows: Array) -> None:
        """Stateless."""


@dataclass
class RandomPolicy:
    """Uniformly random table rows (seeded)."""

    num_actions: int
    rng: np.random.Generator
    name: str = "random"
    table: Array | None = None  # the table the rows are drawn from (None: the env's)

    def act(self, obs: Array, state: GameArrays, car_teams: Array) -> Array:
        return self.rng.integers(0, self.num_actions, obs.shape[0])

    def reset(self, rows: Array) -> None:
        """Stateless."""


@dataclass
class ScriptedPolicy:
    """The rule-based baseline (:class:`RulePolicy`)."""

    rules: RulePolicy
    name: str = "rule"

    @property
    def table(self) -> Array | None:
        """The table the rule bot picks rows of."""
        return self.rules.table

    def act(self, obs: Array, state: GameArrays, car_teams: Array) -> Array:
        return self.rules.act(state, car_teams)

    def reset(self, rows: Array) -> None:
        """Stateless."""


class NeuralPolicy:
    """A frozen policy network loaded from a checkpoint (weights + observation normalizer).

    It acts in the lookup table of the config stored with the checkpoint (:attr:`table`, from
    ``meta["config"]["env"]["action_table"]``; the default table when that is unset).

    Args:
        num_actions: if given, the number of actions the caller's env has; a checkpoint with another
            count is refused (the old check, for callers that step the env with its indices).
        table: if given, the env's table; a checkpoint trained with another table is refused (for
            callers that cannot decode another table, e.g. the opponent pool). Without either the
            policy plays with its own table wherever it is (a match decodes it, see
            :mod:`speedflip.selfplay.match`).
    """

    def __init__(
        self,
        path: Path,
        obs_dim: int,
        num_actions: int | None = None,
        deterministic: bool = False,
        seed: int = 0,
        table: Array | None = None,
    ) -> None:
        meta = verify_checkpoint(path)
        compat = meta.get("compat", {})
        config = meta.get("config", {})
        try:
            own = table_from_run_config(config if isinstance(config, dict) else None)
        except ActionError as err:
            raise CheckpointError(f"{path}: the stored config's action table cannot be built: {err}") from None
        wanted = num_actions if num_actions is not None else (None if table is None else int(table.shape[0]))
        if compat.get("obs_dim") != obs_dim or (wanted is not None and compat.get("num_actions") != wanted):
            raise CheckpointError(
                f"{path}: trained with obs size {compat.get('obs_dim')} and {compat.get('num_actions')} actions, "
                f"but this match needs obs size {obs_dim}"
                + (f" and {wanted} actions" if wanted is not None else "")
                + "; play it at the team size it was trained for (--team-size) or use a checkpoint of a matching run"
            )
        if compat.get("num_actions") != own.shape[0]:
            raise CheckpointError(
                f"{path}: the network has {compat.get('num_actions')} action outputs but the action table of its "
                f"stored config has {own.shape[0]} rows; it cannot be played with a speedflip lookup table"
            )
        if table is not None and not same_table(own, table):
            raise CheckpointError(
                f"{path}: trained with another lookup table (env.action_table = "
                f"{(config.get('env') or {}).get('action_table') if isinstance(config, dict) else None}) "
                "than the one here; its action indices would mean other controls"
            )
        self.table: Array = own
        if compat.get("action_form", "table") != "table":
            raise CheckpointError(
                f"{path}: trained with env.action_form={compat.get('action_form')}; matches and the opponent pool "
                "play lookup-table policies only for now"
            )
        self.path = path
        self.name = _describe(path, meta)
        self.global_step = int(meta.get("global_step", 0))
        self.model = model_from_compat(compat)
        self.recurrent = not isinstance(self.model, ActorCritic)  # its memory steps at every call
        self.model.load_state_dict(load_file(str(path / "model.safetensors")))
        self.model.eval()
        self.memory = ActingMemory(self.model)
        state = load_file(str(path / "state.safetensors"))
        self.obs_rms = RunningMeanStd((obs_dim,))
        self.obs_rms.load_state_dict(to_numpy_dict(state, "obs_rms."))
        config = meta.get("config", {})
        self.normalize_obs = bool(config.get("ppo", {}).get("normalize_obs", True))
        self.deterministic = deterministic
        self.generator = torch.Generator().manual_seed(seed)

    @torch.no_grad()
    def logits(self, obs: Array) -> torch.Tensor:
        """The network's action logits for raw observations, normalised as in training (a recurrent policy
        steps its memory)."""
        x = self.obs_rms.normalize(obs) if self.normalize_obs else obs
        return self.memory.logits(torch.as_tensor(x))

    @torch.no_grad()
    def act(self, obs: Array, state: GameArrays, car_teams: Array) -> Array:
        logits = self.logits(obs)
        if self.deterministic:
            best: Array = logits.argmax(-1).numpy()
            return best
        probs = torch.softmax(logits, -1)
        out: Array = torch.multinomial(probs, 1, generator=self.generator).squeeze(-1).numpy()
        return out

    def reset(self, rows: Array) -> None:
        self.memory.reset(rows)


class EnsemblePolicy:
    """Several frozen checkpoints of one run playing as one bot (``RUN@lastN``: its last ``N`` milestones).

    Every step each member gives its action probabilities (with its own observation normaliser); the bot
    takes the most likely action of their mean when deterministic (as an exported bot plays), else draws
    from the mean. Neighbouring milestones of one run disagree in idiosyncratic ways (docs/learning.md,
    thirty-eighth session); the mean keeps what they agree on.
    """

    def __init__(self, members: list[NeuralPolicy], name: str, deterministic: bool = False, seed: int = 0) -> None:
        if not members:
            raise ValueError("an ensemble needs at least one member")
        first = members[0]
        for member in members[1:]:
            if not same_table(member.table, first.table):
                raise CheckpointError(
                    f"{member.path} acts in another lookup table than {first.path}; "
                    "the members of an ensemble must share one"
                )
        self.members = members
        self.table: Array = first.table
        self.name = name
        self.path = members[-1].path  # the newest member stands for the ensemble in ratings
        self.global_step = max(m.global_step for m in members)
        self.recurrent = any(m.recurrent for m in members)
        self.deterministic = deterministic
        self.generator = torch.Generator().manual_seed(seed)

    @torch.no_grad()
    def probabilities(self, obs: Array) -> torch.Tensor:
        """The mean of the members' action probabilities ``[N, A]``."""
        return torch.stack([torch.softmax(m.logits(obs), -1) for m in self.members]).mean(0)

    @torch.no_grad()
    def act(self, obs: Array, state: GameArrays, car_teams: Array) -> Array:
        probs = self.probabilities(obs)
        if self.deterministic:
            best: Array = probs.argmax(-1).numpy()
            return best
        out: Array = torch.multinomial(probs, 1, generator=self.generator).squeeze(-1).numpy()
        return out

    def reset(self, rows: Array) -> None:
        for member in self.members:
            member.reset(rows)


ENSEMBLE_TAIL = re.compile(r"last([1-9][0-9]*)")


def last_milestones(run: Path, count: int, spec: str) -> list[Path]:
    """The run's last ``count`` milestones that verify, oldest first, from the stage holding its newest one."""
    stages = [p for p in (run / "milestones").iterdir() if p.is_dir()] if (run / "milestones").is_dir() else []
    if not stages:
        raise CheckpointError(f"'{spec}': '{run}' has no milestones (milestones/<stage>/<step>/); train it longer")
    stage = max(stages, key=lambda p: max((int(c.name) for c in list_checkpoints(p)), default=-1))
    found: list[Path] = []
    for candidate in list_checkpoints(stage):
        try:
            verify_checkpoint(candidate)
        except CheckpointError:
            continue
        found.append(candidate)
        if len(found) == count:
            return found[::-1]
    raise CheckpointError(
        f"'{spec}': stage '{stage.name}' of '{run}' has {len(found)} milestone(s) that verify, not {count}; "
        f"ask for fewer (e.g. {run}@last{max(len(found), 1)})"
    )


def shipped_ensemble(run: Path) -> int:
    """``N`` when run directory ``run`` ships its last ``N`` milestones as one bot (``selfplay.ship_ensemble`` >= 2
    in the config of its newest checkpoint) and has ``N`` milestones that verify; else 0 (its best-rated milestone
    ships)."""
    newest = next(iter(list_checkpoints(run / "checkpoints")), None)
    if newest is None:
        return 0
    try:
        config = json.loads((newest / "meta.json").read_text()).get("config") or {}
        count = int((config.get("selfplay") or {}).get("ship_ensemble", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0
    if count < 2:
        return 0
    try:
        last_milestones(run, count, str(run))
    except CheckpointError:
        return 0
    return count


def ensemble_spec(spec: str) -> tuple[Path, int] | None:
    """``(run, N)`` for a ``RUN@lastN`` spec, or for a run directory that ships an ensemble
    (:func:`shipped_ensemble`); else ``None``."""
    path = Path(spec)
    if path.is_dir() and not (path / "meta.json").is_file():
        count = shipped_ensemble(path)
        return (path, count) if count else None
    run, _, tail = spec.rpartition("@")
    match = ENSEMBLE_TAIL.fullmatch(tail)
    if not run or match is None or Path(spec).exists():
        return None
    if not Path(run).is_dir():
        raise CheckpointError(f"'{spec}': run directory '{run}' does not exist")
    return Path(run), int(match.group(1))


def _describe(path: Path, meta: dict[str, object]) -> str:
    run = path.parent.parent.name if path.parent.name in ("checkpoints",) else path.parent.name
    return f"{run}@{meta.get('global_step')}"


def find_checkpoint(spec: str) -> Path:
    """A run dir (its best-rated milestone when ``best.json`` names one that verifies, else its newest good
    checkpoint), ``RUN@best``, ``RUN@latest`` (the newest good checkpoint), a checkpoint folder, or a
    milestone folder. See :mod:`speedflip.selfplay.best`. For ``RUN@lastN`` (an :class:`EnsemblePolicy`) the
    newest of its members, whose stored config stands for all of them."""
    ensemble = ensemble_spec(spec)
    if ensemble is not None:
        return last_milestones(*ensemble, spec)[-1]  # the newest member (its config and observation settings)
    run, _, tail = spec.rpartition("@")
    if tail in ("best", "latest") and run and not Path(spec).exists():
        if not Path(run).is_dir():
            raise CheckpointError(f"'{spec}': run directory '{run}' does not exist")
        if tail == "latest":
            return _newest_checkpoint(Path(run), spec)
        best = best_checkpoint(Path(run))
        if best is None:
            raise CheckpointError(
                f"'{spec}': the run has no rated milestone that verifies ({Path(run) / BEST_FILE}); "
                f"use {run}@latest for its newest checkpoint"
            )
        return best
    path = Path(spec)
    if not path.exists():
        raise CheckpointError(
            f"'{spec}' is neither a policy name (rule, random, idle) nor an existing run directory or checkpoint"
        )
    if (path / "meta.json").is_file():
        return path
    best = best_checkpoint(path)
    if best is not None:
        return best
    return _newest_checkpoint(path, spec)


def _newest_checkpoint(path: Path, spec: str) -> Path:
    reasons = []
    for candidate in list_checkpoints(path / "checkpoints"):
        try:
            verify_checkpoint(candidate)
            return candidate
        except CheckpointError as err:
            reasons.append(str(err))
    detail = f" ({' | '.join(reasons)})" if reasons else ""
    raise CheckpointError(f"'{spec}' holds no usable checkpoint{detail}")


def idle_policy(table: Array) -> IdlePolicy:
    """The idle car for an env acting with ``table``: it always picks the table's first all-zero row
    (``ValueError`` when the table has none)."""
    neutral = np.flatnonzero(np.all(table == 0.0, axis=1))
    if neutral.size == 0:
        raise ValueError("the action table has no all-zero row for the idle policy")
    return IdlePolicy(int(neutral[0]))


def resolve_policy(
    spec: str, obs_dim: int, table: Array, seed: int = 0, deterministic: bool = False, own_table: bool = False
) -> Policy:
    """Turn a command-line policy spec into a :class:`Policy` for an env acting with ``table``.

    ``own_table=False`` (callers that step the env with the indices as they are): a checkpoint must
    have been trained with ``table``. ``own_table=True`` (matches through
    :func:`~speedflip.selfplay.match.play_match`, which decodes each player's table): a checkpoint
    plays with its own table, and the rule bot with the default table if ``table`` lacks its rows.
    """
    num_actions = int(table.shape[0])
    if spec == "rule":
        return ScriptedPolicy(RulePolicy.for_table(table) if own_table else RulePolicy(table))
    if spec == "random":
        return RandomPolicy(num_actions, np.random.default_rng(seed))
    if spec == "idle":
        return idle_policy(table)
    ensemble = ensemble_spec(spec)
    if ensemble is not None:
        run, count = ensemble
        members = [
            NeuralPolicy(p, obs_dim, deterministic=deterministic, seed=seed, table=None if own_table else table)
            for p in last_milestones(run, count, spec)
        ]
        return EnsemblePolicy(members, f"{run.name}@last{count}", deterministic=deterministic, seed=seed)
    path = find_checkpoint(spec)
    if own_table:
        return NeuralPolicy(path, obs_dim, deterministic=deterministic, seed=seed)
    return NeuralPolicy(path, obs_dim, deterministic=deterministic, seed=seed, table=table)


def checkpoint_meta(path: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((path / "meta.json").read_text())
    return data
