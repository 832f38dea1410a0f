"""The one run loop of ``speedflip train``, for Rocket League and Gymnasium runs alike.

It owns what every run needs: the run-directory lock, choosing the checkpoint to resume, the
resolved ``config.yaml``, the summary table, metric sinks (``metrics.jsonl``, TensorBoard), the
progress bar, checkpoints every ``run.checkpoint_interval_steps``, signals (save and exit; a second
signal exits at once), and turning faults into exit codes with a message (1: the run stopped and its
last good state is saved; 130: second interrupt). What differs between environments lives in a
:class:`Session`: how one iteration collects and learns, and what happens between iterations
(milestones, periodic evaluation, the best checkpoint, the schedule).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import yaml
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from speedflip.checkpoint import CheckpointError, describe_write_error, list_checkpoints, verify_checkpoint
from speedflip.config import Config, config_to_dict
from speedflip.errors import RunStoppedError
from speedflip.train.metrics import JsonlSink, TensorBoardSink
from speedflip.train.rundir import RunDirError, lock_run_dir, prepare_run_dir
from speedflip.train.signals import StopFlag
from speedflip.train.warmstart import StartPoint, check_fits, check_target


class Session(Protocol):
    """One run's learner, collector and schedule as the run loop drives them."""

    title: str  # the summary table's title

    @property
    def global_step(self) -> int:
        """Agent steps trained so far."""

    def load(self, path: Path) -> None:
        """Resume from a verified checkpoint of this run."""

    def train_seconds(self) -> float:
        """Wall-clock seconds of training in this run so far, earlier sessions of a resumed run included (the
        checkpoints store it as ``train_seconds``); ``run.time_budget_minutes`` is measured on it."""

    def start_from(self, start: StartPoint) -> None:
        """Warm-start a new run from another run's checkpoint or milestone (``--from``): its weights and
        observation normalizer (with ``start.keep_step`` also the optimizer and counters); the checkpoints
        this session saves record ``start.lineage()``."""

    def summary_rows(self, run_dir: Path, resumed_from: Path | None) -> list[tuple[str, str]]:
        """(key, value) rows of the summary table printed at start."""

    def notes(self) -> list[str]:
        """Notes for the user printed after the summary (fallbacks, what run.amp did, ...)."""

    def iterate(self) -> dict[str, Any]:
        """Collect and learn once; the iteration's metrics record."""

    def between(self, record: dict[str, Any], console: Console) -> None:
        """After the record is complete but before it is written: evaluation, milestones, schedule.
        May add keys to ``record``."""

    def progress_fields(self, record: dict[str, Any]) -> dict[str, str]:
        """The progress bar's fields (``reward`` and ``extra``) from the record."""

    def save(self, checkpoints_dir: Path, meta: dict[str, Any]) -> Path:
        """A rolling checkpoint ``checkpoints/<step>``."""

    def finish(self, console: Console, run_dir: Path) -> None:
        """After the final save of a run that ended normally (e.g. report the best evaluation)."""

    def close(self) -> None: ...


class TrainClock:
    """Wall-clock seconds of training in a run, earlier sessions of a resumed run included: ``before`` (the
    resumed checkpoint's ``train_seconds``) plus the time since this session's first iteration (:meth:`start`)."""

    def __init__(self) -> None:
        self.before = 0.0
        self._started: float | None = None

    def start(self) -> None:
        """Mark this session's first iteration (later calls change nothing)."""
        if self._started is None:
            self._started = time.perf_counter()

    def seconds(self) -> float:
        now = time.perf_counter()
        return self.before + now - (self._started if self._started is not None else now)


def time_budget_spent(cfg: Config, train_seconds: float) -> bool:
    """Whether ``run.time_budget_minutes`` (when set) is used up after ``train_seconds`` of training."""
    budget = cfg.run.time_budget_minutes
    return budget is not None and train_seconds >= budget * 60.0


def describe_budget(cfg: Config) -> str:
    """The start-up summary's budget line: agent steps, the time budget, the checkpoint interval."""
    minutes = cfg.run.time_budget_minutes
    timed = "" if minutes is None else f" or {minutes:g} minutes of training, whichever comes first"
    return f"{cfg.run.total_steps:,} agent steps{timed}, checkpoint every {cfg.run.checkpoint_interval_steps:,}"


def _fmt(value: Any, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def run(
    cfg: Config,
    run_dir: Path,
    compat: dict[str, Any],
    make_session: Callable[[Path], Session],
    new: bool = False,
    console: Console | None = None,
    preflight: Callable[[Path], None] | None = None,
    start: StartPoint | None = None,
) -> int:
    """Train (or resume) the run in ``run_dir``; returns a process exit code.

    ``compat`` is the network signature checkpoints must match (checked before anything is built);
    ``preflight(run_dir)`` checks run files before anything is written (e.g. a foreign games.csv);
    ``start`` (``--from``) starts a new run from another run's policy: refused before anything is created
    when its network does not fit, and inside the lock when ``run_dir`` already has checkpoints.
    """
    console = console or Console()
    run_dir = run_dir.resolve()  # `--run-dir .` keeps working after --new moves the old run aside
    if start is not None:
        check_fits(start, compat, cfg)
    with lock_run_dir(run_dir):
        if start is not None:
            check_target(start, run_dir, new)
        if preflight is not None and not new:
            preflight(run_dir)
        plan = prepare_run_dir(run_dir, compat, new)
        if plan.archived_to is not None:
            console.print(f"--new: the previous run was moved to {plan.archived_to}")
        for reason in plan.skipped:
            console.print(f"[yellow]skipped checkpoint[/yellow] {escape(reason)}", soft_wrap=True)
        for note in plan.leftovers:
            console.print(f"note: {escape(note)}", soft_wrap=True)
        session = make_session(run_dir)
        try:
            if plan.checkpoint is not None:
                _load(session, plan.checkpoint)
            elif start is not None:
                _load(session, start.path, start)
            _write_config(cfg, run_dir)
            table = Table(title=session.title, show_header=False, title_justify="left")
            for key, value in session.summary_rows(run_dir, plan.checkpoint):
                table.add_row(key, escape(value))
                if key == "resumed from" and start is not None and plan.checkpoint is None:
                    table.add_row("started from", escape(start.describe()))
            console.print(table)
            for note in dict.fromkeys(session.notes()):
                console.print(f"note: {escape(note)}", soft_wrap=True)
            if session.global_step >= cfg.run.total_steps:
                console.print(
                    f"This run is already complete at {session.global_step:,} agent steps. To train further, "
                    f"raise the budget, e.g. --set run.total_steps={cfg.run.total_steps * 2}, or use --new."
                )
                return 0
            budget = cfg.run.time_budget_minutes
            if budget is not None and time_budget_spent(cfg, session.train_seconds()):
                console.print(
                    f"This run is already complete: it has trained {session.train_seconds() / 60:.1f} minutes of its "
                    f"{budget:g}-minute time budget. To train further, raise it, e.g. --set "
                    f"run.time_budget_minutes={budget * 2:g}, or use --new."
                )
                return 0
            return _loop(cfg, session, run_dir, console)
        finally:
            session.close()


def write_resolved_config(cfg: Config, run_dir: Path) -> None:
    """``run_dir/config.yaml``: the resolved config of this start."""
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config_to_dict(cfg), sort_keys=False))


def _write_config(cfg: Config, run_dir: Path) -> None:
    try:
        write_resolved_config(cfg, run_dir)
    except OSError as err:
        raise RunDirError(
            f"cannot write '{run_dir / 'config.yaml'}': {describe_write_error(err)}; nothing was trained. "
            "Free space or fix the permissions there, or choose another --run-dir."
        ) from None


def _load(session: Session, path: Path, start: StartPoint | None = None) -> None:
    """Load ``path`` (a resume, or with ``start`` a warm start); a verified checkpoint that still does not
    fit is a clear error."""
    try:
        if start is None:
            session.load(path)
        else:
            session.start_from(start)
    except CheckpointError:
        raise
    except (KeyError, ValueError, RuntimeError, TypeError, IndexError) as err:
        raise CheckpointError(
            f"checkpoint '{path}' passed its checksums but does not fit this run ({type(err).__name__}: "
            f"{str(err)[:300]}). It was left untouched. Use the config it was saved with (its meta.json "
            "holds it), start fresh with --new (the old run is moved aside), or pick another --run-dir."
        ) from None


def _progress(cfg: Config, session: Session, console: Console) -> tuple[Progress, TaskID]:
    progress = Progress(
        TextColumn("[bold]train[/bold]"),
        BarColumn(),
        TextColumn("{task.completed:,}/{task.total:,} steps"),
        TextColumn("{task.fields[sps]} sps"),
        TextColumn("reward {task.fields[reward]}"),
        TextColumn("{task.fields[extra]}"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
    )
    task = progress.add_task(
        "train", total=cfg.run.total_steps, completed=session.global_step, sps="-", reward="-", extra=""
    )
    return progress, task


def _loop(cfg: Config, session: Session, run_dir: Path, console: Console) -> int:
    errors = Console(stderr=True)
    try:
        jsonl = JsonlSink(run_dir / "metrics.jsonl")
        tb = TensorBoardSink(run_dir / "tb") if cfg.run.tensorboard else None
    except OSError as err:
        raise RunDirError(
            f"cannot open the metrics files in '{run_dir}': {describe_write_error(err)}; nothing was trained. "
            "Free space or fix the permissions there, or choose another --run-dir."
        ) from None
    checkpoints = run_dir / "checkpoints"
    reason = "budget reached"
    stopped: RunStoppedError | None = None
    try:
        # the final save happens inside StopFlag too: a second signal during it exits at once (the
        # unfinished save is removed; the previous checkpoints are intact)
        with StopFlag() as stop:
            try:
                _iterations(cfg, session, run_dir, console, stop, jsonl, tb)
            except RunStoppedError as err:
                stopped = err
            if stopped is not None:
                errors.print(Text.assemble(("error: ", "bold red"), str(stopped)), soft_wrap=True)
                _save_after_stop(session, checkpoints, stopped, console, errors)
                return 1
            if stop.requested:
                reason = f"{stop.signal_name} received"
            elif session.global_step < cfg.run.total_steps and time_budget_spent(cfg, session.train_seconds()):
                reason = f"time budget of {cfg.run.time_budget_minutes:g} minutes reached"
            path = session.save(checkpoints, {"reason": reason})
        console.print(f"Stopped ({reason}) at {session.global_step:,} agent steps; checkpoint: {path}", soft_wrap=True)
        session.finish(console, run_dir)
        console.print(f"Resume with the same command; TensorBoard: tensorboard --logdir {run_dir}", soft_wrap=True)
        return 0
    except KeyboardInterrupt:
        console.print("Second interrupt: exiting now without saving (the last checkpoint is intact).")
        return 130
    except CheckpointError as err:
        errors.print(Text.assemble(("error: ", "bold red"), str(err)), soft_wrap=True)
        errors.print(f"Training stopped at {session.global_step:,} agent steps without this save.", soft_wrap=True)
        return 1
    except OSError as err:
        errors.print(
            Text.assemble(
                ("error: ", "bold red"),
                f"cannot write to the run directory '{run_dir}': {describe_write_error(err)} "
                f"({err.filename or 'a run file'}). The checkpoints already saved are intact. Free space or "
                "choose another --run-dir (copy the run there), then run the same command to resume.",
            ),
            soft_wrap=True,
        )
        return 1
    finally:
        for sink in (jsonl, tb):
            if sink is not None:
                # a full disk can fail the last flush; there is nothing more to save there
                with contextlib.suppress(OSError):
                    sink.close()


def _save_after_stop(
    session: Session, checkpoints: Path, stopped: RunStoppedError, console: Console, errors: Console
) -> None:
    """Save the last good state after a :class:`RunStoppedError`; if that is impossible too (e.g. the
    collector that holds the arenas' RNG state is gone), say which checkpoint on disk is the newest."""
    try:
        path = session.save(checkpoints, {"reason": f"stopped: {type(stopped).__name__}"})
    except (RuntimeError, OSError) as err:  # CheckpointError and the collector's errors are RuntimeErrors
        newest = next((p for p in list_checkpoints(checkpoints) if _verifies(p)), None)
        errors.print(
            f"The last state could not be saved ({type(err).__name__}: {err}). The newest checkpoint on disk is "
            f"{newest or '- (none)'}; fix the cause above and run the same command to resume from it.",
            soft_wrap=True,
        )
        return
    console.print(
        f"Stopped at {session.global_step:,} agent steps; the last good state is saved in {path}. "
        "Fix the cause above and run the same command to resume.",
        soft_wrap=True,
    )


def _verifies(path: Path) -> bool:
    try:
        verify_checkpoint(path)
    except CheckpointError:
        return False
    return True


def _iterations(
    cfg: Config,
    session: Session,
    run_dir: Path,
    console: Console,
    stop: StopFlag,
    jsonl: JsonlSink,
    tb: TensorBoardSink | None,
) -> None:
    """Train until the budget (``run.total_steps``, ``run.time_budget_minutes``) is reached or a stop is
    requested, saving at every checkpoint interval."""
    checkpoints = run_dir / "checkpoints"
    interval = cfg.run.checkpoint_interval_steps
    next_checkpoint = (session.global_step // interval + 1) * interval
    start = time.perf_counter()
    start_step = session.global_step
    last_line = 0.0
    progress, task = _progress(cfg, session, console)
    with progress:
        while session.global_step < cfg.run.total_steps:
            record = session.iterate()
            record["wall_seconds"] = time.perf_counter() - start
            # the clock is read once per iteration, before ``between``: the loop stops only on a reading that
            # ``between``'s own later reading also finds spent, so a session's end-of-budget work (the final
            # evaluation) is never skipped by a clock that ran out between the two readings
            budget_spent = time_budget_spent(cfg, session.train_seconds())
            session.between(record, console)
            jsonl.write(record)
            if tb is not None:
                tb.write(record)
            overall_sps = (session.global_step - start_step) / max(time.perf_counter() - start, 1e-9)
            fields = session.progress_fields(record)
            progress.update(
                task,
                total=_expected_total(cfg, session, overall_sps),
                completed=session.global_step,
                sps=f"{overall_sps:,.0f}",
                reward=fields.get("reward", "-"),
                extra=fields.get("extra", ""),
            )
            if not console.is_terminal and time.perf_counter() - last_line > 10.0:
                last_line = time.perf_counter()
                console.print(
                    f"step {session.global_step:,}/{_expected_total(cfg, session, overall_sps):,}  "
                    f"sps {overall_sps:,.0f}  "
                    f"reward {fields.get('reward', '-')}  {fields.get('extra', '')}"
                    + (
                        f"  entropy {_fmt(record['losses/entropy'])}"
                        if record.get("losses/entropy") is not None
                        else ""
                    ),
                    soft_wrap=True,
                )
            if session.global_step >= next_checkpoint:
                session.save(checkpoints, checkpoint_meta(record))
                next_checkpoint = (session.global_step // interval + 1) * interval
            if stop.requested or budget_spent:
                break


def _expected_total(cfg: Config, session: Session, sps: float) -> int:
    """The progress bar's total: ``run.total_steps``, or with a time budget the steps the run will have made
    when the budget ends at this speed, when that comes first (so the bar and its time left follow the clock)."""
    budget = cfg.run.time_budget_minutes
    if budget is None:
        return cfg.run.total_steps
    left_seconds = max(0.0, budget * 60.0 - session.train_seconds())
    return min(cfg.run.total_steps, session.global_step + int(sps * left_seconds))


def checkpoint_meta(record: dict[str, Any]) -> dict[str, Any]:
    """What a checkpoint's meta.json says of the iteration it was saved after."""
    return {
        "episode_reward_mean": record.get("charts/episode_reward_mean"),
        "touches_per_minute": record.get("charts/touches_per_minute"),
        "entropy": record.get("losses/entropy"),
        "approx_kl": record.get("losses/approx_kl"),
        "sps": record.get("sps"),
    }
