"""``speedflip train``: a run directory, the config summary, the progress bar, checkpoints."""

from __future__ import annotations

import contextlib
import csv
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from speedflip.config import Config
from speedflip.errors import RunStoppedError

if TYPE_CHECKING:
    from speedflip.watch.live import LiveView

from speedflip.doctor import raise_on_failure, startup_checks
from speedflip.env.action_forms import build_table
from speedflip.env.actions import LookupTableAction
from speedflip.env.obs import observation_size
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.models.build import recurrent_spec
from speedflip.selfplay.league import GAMES_FIELDS, LeagueError
from speedflip.train.checkpoint import CheckpointError, describe_write_error, list_checkpoints, verify_checkpoint
from speedflip.train.metrics import JsonlSink, TensorBoardSink
from speedflip.train.notify import post_milestone
from speedflip.train.rundir import RunDirError, compat_signature, prepare_run_dir
from speedflip.train.trainer import (
    StopFlag,
    Trainer,
    config_hash,
    git_commit,
    stage_config,
    summarize_iteration,
    write_resolved_config,
)


def _fmt(value: Any, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def print_summary(console: Console, cfg: Config, trainer: Trainer, run_dir: Path, resumed_from: Path | None) -> None:
    table = Table(title="speedflip run", show_header=False, title_justify="left")
    rows = [
        ("run dir", str(run_dir)),
        ("resumed from", str(resumed_from) if resumed_from else "- (fresh start)"),
        ("device", str(trainer.device)),
        ("arenas / agents", f"{trainer.env.num_arenas} / {trainer.env.num_agents} "
         f"({cfg.env.blue_size}v{cfg.env.orange_size}, self-play)"),
        ("tick skip / action delay", f"{cfg.env.tick_skip} / {cfg.env.action_delay_ticks} tick"),
        ("obs size", str(trainer.env.obs_dim)),
        ("actions", trainer.env.actions.coverage.summary()),
        ("network", _describe_network(cfg, trainer)),
        ("batch / minibatch",
         f"{cfg.batch_size:,} / {cfg.ppo.minibatch_size:,} x {cfg.ppo.update_epochs} epochs"),
        ("budget",
         f"{cfg.run.total_steps:,} agent steps, checkpoint every {cfg.run.checkpoint_interval_steps:,}"),
        ("rewards", ", ".join(f"{k} {v:g}" for k, v in cfg.env.rewards.items())),
        ("owner / commit / config", f"{cfg.run.owner} / {git_commit() or '-'} / {config_hash(cfg)}"),
    ]  # fmt: skip
    for key, value in rows:
        table.add_row(key, escape(value))
    console.print(table)


def _describe_network(cfg: Config, trainer: Trainer) -> str:
    params = f"{trainer.model.num_parameters():,} parameters"
    if cfg.algo == "ppo_recurrent":
        r = cfg.recurrent
        return (f"encoder {r.encoder_layers} -> {r.cell.upper()} {r.hidden_size} x {r.num_layers} layer(s) -> "
                f"policy and value heads, sequences of {r.sequence_length} steps, {params}")  # fmt: skip
    return f"policy {cfg.ppo.policy_layers}, critic {cfg.ppo.critic_layers}, {params}"


def expected_compat(cfg: Config) -> dict[str, Any]:
    """The compatibility signature this config's network will have (checked against checkpoints before
    anything is built or written)."""
    env_cfg = stage_config(cfg, 0).env
    if env_cfg.rlgym is not None:
        from speedflip.env.rlgym_adapter import probe_dims

        obs_dim, num_actions = probe_dims(env_cfg.rlgym)
    else:
        obs_dim = observation_size(
            env_cfg.obs_builder, env_cfg.blue_size, env_cfg.orange_size, env_cfg.obs_team_size,
            env_cfg.nearest_pads, env_cfg.frame_stack,
        )  # fmt: skip
        table = None if env_cfg.action_table is None else build_table(**env_cfg.action_table.model_dump())
        num_actions = LookupTableAction(table).num_actions
    return compat_signature(
        obs_dim, num_actions, cfg.ppo.policy_layers, cfg.ppo.critic_layers, env_cfg.action_form, recurrent_spec(cfg)
    )


def train(cfg: Config, run_dir: Path, new: bool = False, console: Console | None = None, render: bool = False) -> int:
    """Train (or resume) the run in ``run_dir``; returns a process exit code.

    ``render``: stream arena 0 to RLViser at real-time speed (in-process collector; the other arenas
    are not slowed: states are copied only while a segment is filling, a thread plays them).
    """
    console = console or Console()
    run_dir = run_dir.resolve()  # `--run-dir .` keeps working after --new moves the old run aside
    if not new:
        check_games_log(run_dir / "games.csv")  # before anything is created or written
    plan = prepare_run_dir(run_dir, expected_compat(cfg), new)
    if plan.archived_to is not None:
        console.print(f"--new: the previous run was moved to {plan.archived_to}")
    for reason in plan.skipped:
        console.print(f"[yellow]skipped checkpoint[/yellow] {escape(reason)}", soft_wrap=True)
    for note in plan.leftovers:
        console.print(f"note: {escape(note)}", soft_wrap=True)

    trainer = Trainer(cfg, run_dir)
    try:
        if trainer.env_cfg.env.rlgym is None:
            raise_on_failure(startup_checks(trainer.env_cfg.env, trainer.model))
        if plan.checkpoint is not None:
            _load(trainer, plan.checkpoint)
        recovered = trainer.matchmaker.league.recovery_note
        if recovered:
            console.print(f"[yellow]note[/yellow]: {escape(recovered)}", soft_wrap=True)
        try:
            write_resolved_config(cfg, run_dir)
        except OSError as err:
            raise RunDirError(
                f"cannot write '{run_dir / 'config.yaml'}': {describe_write_error(err)}; nothing was trained. "
                "Free space or fix the permissions there, or choose another --run-dir."
            ) from None
        print_summary(console, cfg, trainer, run_dir, plan.checkpoint)
        for note in dict.fromkeys(trainer.notes):
            console.print(f"note: {note}", soft_wrap=True)
        for note in trainer.matchmaker.notes:
            console.print(f"note: {note}", soft_wrap=True)
        if trainer.global_step >= cfg.run.total_steps:
            console.print(
                f"This run is already complete at {trainer.global_step:,} agent steps. To train further, "
                f"raise the budget, e.g. --set run.total_steps={cfg.run.total_steps * 2}, or use --new."
            )
            return 0
        view = _open_live_view(trainer, console) if render else None
        try:
            return _loop(cfg, trainer, run_dir, console)
        finally:
            if view is not None:
                view.close()
    finally:
        trainer.close()


def check_games_log(path: Path) -> None:
    """Refuse to start on a ``games.csv`` that speedflip did not write (before anything is trained).

    Appending rated games to a foreign or damaged file would mix two formats; the file is left as it is.
    """
    if not path.is_file() or path.stat().st_size == 0:
        return
    try:
        with path.open(newline="", encoding="utf-8") as f:
            header = next(csv.reader(f), None)
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise LeagueError(f"the game log '{path}' cannot be read ({err}); it was left untouched.") from None
    if header != GAMES_FIELDS:
        raise LeagueError(
            f"the game log '{path}' does not start with the games.csv header speedflip writes (corrupt or "
            f"another file); it was left untouched and nothing was trained. Move it aside (mv {path} "
            f"{path}.bad) and run again: the ratings in league.json are kept."
        )


def _load(trainer: Trainer, path: Path) -> None:
    """Load ``path`` into the trainer; a verified checkpoint that still does not fit is a clear error."""
    try:
        trainer.load(path)
    except CheckpointError:
        raise
    except (KeyError, ValueError, RuntimeError, TypeError, IndexError) as err:
        raise CheckpointError(
            f"checkpoint '{path}' passed its checksums but does not fit this run ({type(err).__name__}: "
            f"{str(err)[:300]}). It was left untouched. Use the config it was saved with (its meta.json "
            "holds it), start fresh with --new (the old run is moved aside), or pick another --run-dir."
        ) from None


def _loop(cfg: Config, trainer: Trainer, run_dir: Path, console: Console) -> int:
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
    progress = Progress(
        TextColumn("[bold]train[/bold]"),
        BarColumn(),
        TextColumn("{task.completed:,}/{task.total:,} steps"),
        TextColumn("{task.fields[sps]} sps"),
        TextColumn("reward {task.fields[reward]}"),
        TextColumn("touches/min {task.fields[touches]}"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
    )
    task = progress.add_task(
        "train", total=cfg.run.total_steps, completed=trainer.global_step, sps="-", reward="-", touches="-"
    )
    reason = "budget reached"
    stopped: RunStoppedError | None = None
    try:
        # the final save happens inside StopFlag too: a second signal during it exits at once (the
        # unfinished save is removed; the previous checkpoints are intact)
        with StopFlag() as stop, progress:
            try:
                _iterations(cfg, trainer, run_dir, console, stop, progress, task, jsonl, tb)
            except RunStoppedError as err:
                stopped = err
            if stopped is not None:
                errors.print(Text.assemble(("error: ", "bold red"), str(stopped)), soft_wrap=True)
                _save_after_stop(trainer, checkpoints, stopped, console, errors)
                return 1
            if stop.requested:
                reason = f"{stop.signal_name} received"
            path = trainer.save(checkpoints, {"reason": reason})
        console.print(f"Stopped ({reason}) at {trainer.global_step:,} agent steps; checkpoint: {path}", soft_wrap=True)
        console.print(f"Resume with the same command; TensorBoard: tensorboard --logdir {run_dir}", soft_wrap=True)
        return 0
    except KeyboardInterrupt:
        console.print("Second interrupt: exiting now without saving (the last checkpoint is intact).")
        return 130
    except CheckpointError as err:
        errors.print(Text.assemble(("error: ", "bold red"), str(err)), soft_wrap=True)
        errors.print(f"Training stopped at {trainer.global_step:,} agent steps without this save.", soft_wrap=True)
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
    trainer: Trainer, checkpoints: Path, stopped: RunStoppedError, console: Console, errors: Console
) -> None:
    """Save the last good state after a :class:`RunStoppedError`; if that is impossible too (e.g. the
    collector that holds the arenas' RNG state is gone), say which checkpoint on disk is the newest."""
    try:
        path = trainer.save(checkpoints, {"reason": f"stopped: {type(stopped).__name__}"})
    except (RuntimeError, OSError) as err:  # CheckpointError and the collector's errors are RuntimeErrors
        newest = next((p for p in list_checkpoints(checkpoints) if _verifies(p)), None)
        errors.print(
            f"The last state could not be saved ({type(err).__name__}: {err}). The newest checkpoint on disk is "
            f"{newest or '- (none)'}; fix the cause above and run the same command to resume from it.",
            soft_wrap=True,
        )
        return
    console.print(
        f"Stopped at {trainer.global_step:,} agent steps; the last good state is saved in {path}. "
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
    trainer: Trainer,
    run_dir: Path,
    console: Console,
    stop: StopFlag,
    progress: Progress,
    task: TaskID,
    jsonl: JsonlSink,
    tb: TensorBoardSink | None,
) -> None:
    """Train until the budget is reached or a stop is requested, saving at every checkpoint interval."""
    checkpoints = run_dir / "checkpoints"
    interval = cfg.run.checkpoint_interval_steps
    next_checkpoint = (trainer.global_step // interval + 1) * interval
    milestone_every = cfg.selfplay.snapshot_interval_steps
    next_milestone = (trainer.global_step // milestone_every + 1) * milestone_every
    eval_every = cfg.selfplay.eval_interval_steps
    next_eval = (trainer.global_step // eval_every + 1) * eval_every if eval_every else None
    start = time.perf_counter()
    start_step = trainer.global_step
    last_line = 0.0
    while trainer.global_step < cfg.run.total_steps:
        batch, raw_obs, stats = trainer.collect()
        learn_start = time.perf_counter()
        metrics = trainer.update(batch, raw_obs)
        learn_seconds = time.perf_counter() - learn_start
        record = summarize_iteration(trainer, stats, metrics, learn_seconds, time.perf_counter() - start)
        if next_eval is not None and trainer.global_step >= next_eval:
            record.update(trainer.evaluate_vs_rule())
            next_eval = (trainer.global_step // eval_every + 1) * eval_every
        record.update(trainer.matchmaker.metrics())
        record["curriculum/stage"] = trainer.stage
        if isinstance(trainer.env, RocketLeagueVecEnv):
            record["charts/nan_resets"] = trainer.env.total_nan_resets
        record["charts/reward_phase"] = trainer.reward_phase
        trainer.matchmaker.flush()
        jsonl.write(record)
        if tb is not None:
            tb.write(record)
        overall_sps = (trainer.global_step - start_step) / max(time.perf_counter() - start, 1e-9)
        progress.update(
            task,
            completed=trainer.global_step,
            sps=f"{overall_sps:,.0f}",
            reward=_fmt(record["charts/episode_reward_mean"]),
            touches=_fmt(record["charts/touches_per_minute"]),
        )
        if not console.is_terminal and time.perf_counter() - last_line > 10.0:
            last_line = time.perf_counter()
            console.print(
                f"step {trainer.global_step:,}/{cfg.run.total_steps:,}  sps {overall_sps:,.0f}  "
                f"reward {_fmt(record['charts/episode_reward_mean'])}  "
                f"touches/min {_fmt(record['charts/touches_per_minute'])}  "
                f"entropy {_fmt(record['losses/entropy'])}",
                soft_wrap=True,
            )
        if trainer.global_step >= next_checkpoint:
            trainer.save(checkpoints, _milestone_meta(record))
            next_checkpoint = (trainer.global_step // interval + 1) * interval
        if trainer.global_step >= next_milestone:
            meta = {**_milestone_meta(record), "phase": trainer.stage_name, "timestamp": time.time()}
            path = trainer.milestone(meta)
            next_milestone = (trainer.global_step // milestone_every + 1) * milestone_every
            post_milestone(path, meta, trainer.matchmaker.learner_elo, console)
            if path is not None and cfg.run.milestone_replays:
                _milestone_replay(path, run_dir, console)
        for message in (trainer.advance_reward_phase(record), trainer.advance_curriculum()):
            if message:
                console.print(message, soft_wrap=True)
        if stop.requested:
            break


def _open_live_view(trainer: Trainer, console: Console) -> LiveView | None:
    from speedflip.env.vec_env import RocketLeagueVecEnv
    from speedflip.watch.live import LiveView

    env = trainer.env
    if not isinstance(env, RocketLeagueVecEnv):
        console.print("note: --render needs the in-process collector (run.collector=inprocess); training goes on")
        return None
    pads = [p.get_pos().as_numpy().tolist() for p in env.arenas.arenas[0].get_boost_pads()]
    view = LiveView.open(env.arenas.tick_skip, env.car_teams.tolist(), pads, say=console.print)
    if view is not None:
        trainer.step_hook = lambda: view.push(env.state)
    return view


def _milestone_replay(path: Path, run_dir: Path, console: Console) -> None:
    """A short replay of the milestone against the rule bot under ``replays/`` (never stops training)."""
    from speedflip.watch.errors import ReplayError
    from speedflip.watch.run import record_milestone_replay

    try:
        html, _ = record_milestone_replay(path, run_dir / "replays")
    except (CheckpointError, ReplayError, OSError) as err:
        console.print(f"note: no milestone replay ({err})", soft_wrap=True)
        return
    console.print(f"milestone replay: {html}", soft_wrap=True)


def _milestone_meta(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "episode_reward_mean": record.get("charts/episode_reward_mean"),
        "touches_per_minute": record.get("charts/touches_per_minute"),
        "entropy": record.get("losses/entropy"),
        "approx_kl": record.get("losses/approx_kl"),
        "sps": record.get("sps"),
    }


def mean_or_none(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None
