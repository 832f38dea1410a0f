"""``speedflip train --env gym:<id>``: the run directory, progress, metrics, checkpoints, best/ and resume.

Same run layout as a Rocket League run (``config.yaml``, ``metrics.jsonl``, ``tb/``,
``checkpoints/<step>/``), plus ``checkpoints/best/``: the checkpoint with the highest mean return
in the periodic evaluations (on separate env copies), replaced atomically when beaten.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from speedflip.checkpoint import CheckpointError, save_checkpoint, verify_checkpoint
from speedflip.config import Config
from speedflip.gym.agents import GymLearner, make_learner
from speedflip.gym.evaluate import EvalSummary, run_episodes, solved_threshold, summarize
from speedflip.provenance import config_hash, git_commit
from speedflip.train.metrics import JsonlSink, TensorBoardSink
from speedflip.train.rundir import prepare_run_dir
from speedflip.train.signals import StopFlag
from speedflip.train.trainer import write_resolved_config

EVAL_SEED_OFFSET = 1_000_003
"""Evaluation env copies are seeded away from the training envs."""


def _fmt(value: Any, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def evaluate_learner(learner: GymLearner, cfg: Config, episodes: int | None = None) -> EvalSummary:
    """Play ``gym.eval_episodes`` episodes with the current policy on fresh env copies (same seeds each time)."""
    assert cfg.gym.env_id is not None
    result = run_episodes(
        cfg.gym.env_id, cfg.gym.env_kwargs, learner.policy(), episodes or cfg.gym.eval_episodes,
        cfg.gym.eval_envs, cfg.run.seed + EVAL_SEED_OFFSET, cfg.gym.eval_deterministic,
    )  # fmt: skip
    return summarize(result, cfg.gym, cfg.gym.env_id, cfg.gym.eval_deterministic)


def best_score(checkpoints_dir: Path) -> float | None:
    """Mean eval return stored in ``checkpoints/best`` (``None`` when there is no usable best)."""
    best = checkpoints_dir / "best"
    if not best.is_dir():
        return None
    try:
        meta = verify_checkpoint(best)
    except CheckpointError:
        return None
    score = meta.get("eval", {}).get("mean_return")
    return float(score) if isinstance(score, (int, float)) else None


def save_best(checkpoints_dir: Path, learner: GymLearner, meta: dict[str, Any]) -> Path:
    """Write the learner as ``checkpoints/best`` (written and verified beside it, then swapped in)."""
    staging = checkpoints_dir / ".best-staging"
    old = checkpoints_dir / ".best-old"
    shutil.rmtree(staging, ignore_errors=True)
    written = save_checkpoint(staging, learner.global_step, learner.to_checkpoint(meta), keep=1)
    best = checkpoints_dir / "best"
    shutil.rmtree(old, ignore_errors=True)
    if best.exists():
        best.rename(old)
    written.rename(best)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)
    return best


def eval_record(summary: EvalSummary) -> dict[str, Any]:
    return {
        "eval/mean_return": summary.mean_return,
        "eval/std_return": summary.std_return,
        "eval/mean_length": summary.mean_length,
        "eval/success_rate": summary.success_rate,
    }


def print_summary(console: Console, cfg: Config, learner: GymLearner, run_dir: Path, resumed: Path | None) -> None:
    table = Table(title="speedflip run (Gymnasium)", show_header=False, title_justify="left")
    if cfg.algo == "dqn":
        d = cfg.dqn
        network = f"Q {d.q_layers}"
        schedule = (f"buffer {d.buffer_size:,}, batch {d.batch_size}, epsilon {d.start_epsilon:g} -> "
                    f"{d.end_epsilon:g} over {d.exploration_fraction:.0%}, learning starts {d.learning_starts:,}, "
                    f"train every {d.train_frequency} x {d.gradient_steps}, target every "
                    f"{d.target_update_interval} (tau {d.tau:g}){', double' if d.double_dqn else ''}")  # fmt: skip
    else:
        if cfg.algo == "ppo_recurrent":
            r = cfg.recurrent
            network = f"{r.cell.upper()} {r.num_layers}x{r.hidden_size}, encoder {r.encoder_layers}"
        else:
            network = f"policy {cfg.ppo.policy_layers}, critic {cfg.ppo.critic_layers}"
        schedule = (f"batch {cfg.batch_size:,} / minibatch {cfg.ppo.minibatch_size:,} x {cfg.ppo.update_epochs} "
                    f"epochs" + (f", sequences of {cfg.recurrent.sequence_length}"
                                 if cfg.algo == "ppo_recurrent" else ""))  # fmt: skip
    assert cfg.gym.env_id is not None
    solved = solved_threshold(cfg.gym, cfg.gym.env_id)
    rows = [
        ("run dir", str(run_dir)),
        ("resumed from", str(resumed) if resumed else "- (fresh start)"),
        ("env", f"{cfg.gym.env_id} x {cfg.gym.num_envs} (obs {learner.info.obs_dim}, {learner.info.num_actions} "
                "actions)"),
        ("algorithm", f"{cfg.algo}: {schedule}"),
        ("network", f"{network}, {learner.num_parameters():,} parameters"),
        ("device", learner.device_choice.description),
        ("amp / compile", f"{'on' if cfg.run.amp else 'off'} / {'on' if cfg.run.compile else 'off'}"
                          + (f": {'; '.join(learner.accel_notes)}" if learner.accel_notes else "")),
        ("budget", f"{cfg.run.total_steps:,} agent steps, checkpoint every {cfg.run.checkpoint_interval_steps:,}"),
        ("evaluation", "off" if not cfg.gym.eval_interval_steps else
         f"every {cfg.gym.eval_interval_steps:,} steps, {cfg.gym.eval_episodes} episodes; solved at "
         f"{'-' if solved is None else format(solved, 'g')}"),
        ("owner / commit / config", f"{cfg.run.owner} / {git_commit() or '-'} / {config_hash(cfg)}"),
    ]  # fmt: skip
    for key, value in rows:
        table.add_row(key, escape(value))
    console.print(table)


def train_gym(cfg: Config, run_dir: Path, new: bool = False, console: Console | None = None) -> int:
    """Train (or resume) a Gymnasium run in ``run_dir``; returns a process exit code."""
    console = console or Console()
    run_dir = run_dir.resolve()
    learner = make_learner(cfg)  # a bad env id or action space fails here, before the run dir is touched
    try:
        plan = prepare_run_dir(run_dir, learner.compat, new)
        if plan.archived_to is not None:
            console.print(f"--new: the previous run was moved to {plan.archived_to}")
        for reason in plan.skipped:
            console.print(f"[yellow]skipped checkpoint[/yellow] {escape(reason)}")
        if plan.checkpoint is not None:
            learner.load(plan.checkpoint)
        write_resolved_config(cfg, run_dir)
        print_summary(console, cfg, learner, run_dir, plan.checkpoint)
        if learner.device_choice.note:
            console.print(f"[yellow]note:[/yellow] {escape(learner.device_choice.note)}", soft_wrap=True)
        if learner.global_step >= cfg.run.total_steps:
            console.print(
                f"This run is already complete at {learner.global_step:,} agent steps. To train further, "
                f"raise the budget, e.g. --set run.total_steps={cfg.run.total_steps * 2}, or use --new."
            )
            return 0
        return _loop(cfg, learner, run_dir, console)
    finally:
        learner.close()


def _loop(cfg: Config, learner: GymLearner, run_dir: Path, console: Console) -> int:
    jsonl = JsonlSink(run_dir / "metrics.jsonl")
    tb = TensorBoardSink(run_dir / "tb") if cfg.run.tensorboard else None
    checkpoints = run_dir / "checkpoints"
    interval = cfg.run.checkpoint_interval_steps
    next_checkpoint = (learner.global_step // interval + 1) * interval
    eval_every = cfg.gym.eval_interval_steps
    next_eval = (learner.global_step // eval_every + 1) * eval_every if eval_every else None
    best = best_score(checkpoints)
    assert cfg.gym.env_id is not None
    solved = solved_threshold(cfg.gym, cfg.gym.env_id)
    announced_solved = best is not None and solved is not None and best >= solved
    last_eval_step = -1
    start = time.perf_counter()
    start_step = learner.global_step
    last_line = 0.0
    progress = Progress(
        TextColumn(f"[bold]{cfg.algo}[/bold] {escape(cfg.gym.env_id)}"),
        BarColumn(),
        TextColumn("{task.completed:,}/{task.total:,} steps"),
        TextColumn("{task.fields[sps]} sps"),
        TextColumn("return {task.fields[ret]}"),
        TextColumn("eval {task.fields[eval]}"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
    )
    task = progress.add_task("train", total=cfg.run.total_steps, completed=learner.global_step, sps="-", ret="-",
                             eval=_fmt(best))  # fmt: skip

    def evaluate(record: dict[str, Any]) -> None:
        nonlocal best, announced_solved, last_eval_step
        summary = evaluate_learner(learner, cfg)
        last_eval_step = learner.global_step
        record.update(eval_record(summary))
        if best is None or summary.mean_return > best:
            best = summary.mean_return
            save_best(checkpoints, learner, {"eval": eval_record_meta(summary), "reason": "best evaluation"})
        record["eval/best_return"] = best
        if solved is not None and summary.mean_return >= solved and not announced_solved:
            announced_solved = True
            record["eval/solved_step"] = learner.global_step
            console.print(
                f"solved: mean return {summary.mean_return:.1f} >= {solved:g} at step {learner.global_step:,} "
                f"({time.perf_counter() - start:.0f} s)",
                soft_wrap=True,
            )

    reason = "budget reached"
    try:
        with StopFlag() as stop, progress:
            while learner.global_step < cfg.run.total_steps:
                record = learner.iterate()
                record["wall_seconds"] = time.perf_counter() - start
                if next_eval is not None and learner.global_step >= next_eval:
                    evaluate(record)
                    next_eval = (learner.global_step // eval_every + 1) * eval_every
                if (
                    next_eval is not None
                    and learner.global_step >= cfg.run.total_steps
                    and (last_eval_step != learner.global_step)
                ):
                    evaluate(record)  # the final policy is always evaluated once
                jsonl.write(record)
                if tb is not None:
                    tb.write(record)
                overall_sps = (learner.global_step - start_step) / max(time.perf_counter() - start, 1e-9)
                progress.update(task, completed=learner.global_step, sps=f"{overall_sps:,.0f}",
                                ret=_fmt(record["charts/episode_reward_mean"]), eval=_fmt(best))  # fmt: skip
                if not console.is_terminal and time.perf_counter() - last_line > 10.0:
                    last_line = time.perf_counter()
                    console.print(
                        f"step {learner.global_step:,}/{cfg.run.total_steps:,}  sps {overall_sps:,.0f}  "
                        f"return {_fmt(record['charts/episode_reward_mean'])}  best eval {_fmt(best)}",
                        soft_wrap=True,
                    )
                if learner.global_step >= next_checkpoint:
                    learner_save(
                        learner, checkpoints, cfg, {"episode_reward_mean": record["charts/episode_reward_mean"]}
                    )
                    next_checkpoint = (learner.global_step // interval + 1) * interval
                if stop.requested:
                    reason = f"{stop.signal_name} received"
                    break
        path = learner_save(learner, checkpoints, cfg, {"reason": reason})
        console.print(f"Stopped ({reason}) at {learner.global_step:,} agent steps; checkpoint: {path}", soft_wrap=True)
        if best is not None:
            console.print(f"Best evaluation: mean return {best:.1f} (checkpoints/best)", soft_wrap=True)
        console.print(
            f"Evaluate with: speedflip eval {run_dir} --episodes 20; resume with the same command; "
            f"TensorBoard: tensorboard --logdir {run_dir}",
            soft_wrap=True,
        )
        return 0
    except KeyboardInterrupt:
        console.print("Second interrupt: exiting now without saving (the last checkpoint is intact).")
        return 130
    finally:
        jsonl.close()
        if tb is not None:
            tb.close()


def eval_record_meta(summary: EvalSummary) -> dict[str, Any]:
    return {
        "mean_return": summary.mean_return,
        "std_return": summary.std_return,
        "mean_length": summary.mean_length,
        "success_rate": summary.success_rate,
        "episodes": summary.episodes,
    }


def learner_save(learner: GymLearner, checkpoints: Path, cfg: Config, meta: dict[str, Any]) -> Path:
    """A rolling checkpoint ``checkpoints/<step>`` (the newest ``run.keep_checkpoints`` are kept)."""
    return save_checkpoint(checkpoints, learner.global_step, learner.to_checkpoint(meta), cfg.run.keep_checkpoints)
