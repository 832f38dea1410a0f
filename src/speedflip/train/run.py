"""``speedflip train`` for Rocket League: the session the one run loop (:mod:`speedflip.train.loop`) drives.

The session wraps a :class:`~speedflip.train.trainer.Trainer` (learner + collector + schedule) and adds
what happens between iterations: periodic evaluation against the rule bot, pool metrics, milestones
(with a replay and a Discord note), and the schedule's reward-phase and curriculum moves.
"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from speedflip.checkpoint import CheckpointError
from speedflip.config import Config
from speedflip.doctor import raise_on_failure, startup_checks
from speedflip.env.action_forms import table_from_spec
from speedflip.env.actions import LookupTableAction
from speedflip.env.obs import observation_size
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.models.build import recurrent_spec
from speedflip.provenance import config_hash, git_commit
from speedflip.schedule import stage_config
from speedflip.selfplay.best import BestMilestone, read_best, run_relative, update_best
from speedflip.selfplay.final_pick import (
    FINAL_PICK_FILE,
    FINAL_PICK_SEED_OFFSET,
    describe_candidate,
    describe_games,
    final_pick,
)
from speedflip.selfplay.league import GAMES_FIELDS, LeagueError
from speedflip.selfplay.rating import RatingError, rate_milestone, rating_unavailable
from speedflip.train.loop import TrainClock, checkpoint_meta, describe_budget
from speedflip.train.loop import run as run_loop
from speedflip.train.notify import post_milestone
from speedflip.train.rundir import compat_signature
from speedflip.train.trainer import Trainer, summarize_iteration
from speedflip.train.warmstart import StartPoint

if TYPE_CHECKING:
    from speedflip.watch.live import LiveView


def _fmt(value: Any, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def train(
    cfg: Config,
    run_dir: Path,
    new: bool = False,
    console: Console | None = None,
    render: bool = False,
    start: StartPoint | None = None,
) -> int:
    """Train (or resume) the Rocket League run in ``run_dir``; returns a process exit code.

    ``start`` (``--from``, see :mod:`speedflip.train.warmstart`) starts the new run from another run's policy.

    ``render``: stream arena 0 to RLViser at real-time speed (in-process collector; the other arenas
    are not slowed: states are copied only while a segment is filling, a thread plays them).
    """
    console = console or Console()
    from speedflip.collect import check_collector  # refuses what the collector cannot drive, before any run dir

    check_collector(cfg, render=render)

    def make_session(resolved: Path) -> RocketLeagueSession:
        return RocketLeagueSession(cfg, resolved, console, render)

    return run_loop(cfg, run_dir, expected_compat(cfg), make_session, new, console, check_run_files, start)


def check_run_files(run_dir: Path) -> None:
    check_games_log(run_dir / "games.csv")


class RocketLeagueSession:
    """A Rocket League run as :class:`speedflip.train.loop.Session`."""

    title = "speedflip run"

    def __init__(self, cfg: Config, run_dir: Path, console: Console, render: bool) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        self.trainer = Trainer(cfg, run_dir)
        self.view: LiveView | None = None
        try:
            if self.trainer.env_cfg.env.rlgym is None:
                raise_on_failure(startup_checks(self.trainer.env_cfg.env, self.trainer.model))
            if render:
                self.view = _open_live_view(self.trainer, console)
        except BaseException:
            self.trainer.close()
            raise
        # wall-clock time over the whole run (earlier sessions' from the checkpoint meta): training, and
        # the milestone rating's share of it (perf/rating_share)
        self.clock = TrainClock()
        self.rating_seconds_total = 0.0
        self._last_record: dict[str, Any] | None = None  # this session's newest iteration record
        self._last_milestone_step: int | None = None
        self._schedule_next()
        self.trainer.train_clock = self.train_seconds  # the schedule's clock (run.time_budget_minutes)

    @property
    def global_step(self) -> int:
        return self.trainer.global_step

    def _schedule_next(self) -> None:
        step, sp = self.trainer.global_step, self.cfg.selfplay
        self.next_milestone = (step // sp.snapshot_interval_steps + 1) * sp.snapshot_interval_steps
        every = sp.eval_interval_steps
        self.next_eval = (step // every + 1) * every if every else None

    def load(self, path: Path) -> None:
        self.trainer.load(path)
        meta = json.loads((path / "meta.json").read_text())
        self.clock.before = float(meta.get("train_seconds", 0.0))
        self.rating_seconds_total = float(meta.get("rating_seconds", 0.0))
        self._schedule_next()

    def train_seconds(self) -> float:
        """Wall-clock seconds of training in this run so far, earlier sessions included."""
        return self.clock.seconds()

    def _clock_meta(self) -> dict[str, float]:
        """What checkpoints and milestones store of the clocks, so they continue after a resume."""
        return {"train_seconds": self.train_seconds(), "rating_seconds": self.rating_seconds_total}

    def start_from(self, start: StartPoint) -> None:
        self.trainer.start_from(start.path, start.keep_step, start.lineage())
        self._schedule_next()

    def notes(self) -> list[str]:
        recovered = self.trainer.matchmaker.league.recovery_note
        unrated = rating_unavailable(self.trainer.env_cfg.env) if self.cfg.selfplay.rate_milestones else None
        return [
            *([recovered] if recovered else []), *self.trainer.notes, *self.trainer.matchmaker.notes,
            *([f"milestones are not rated ({unrated})"] if unrated else []),
        ]  # fmt: skip

    def summary_rows(self, run_dir: Path, resumed_from: Path | None) -> list[tuple[str, str]]:
        cfg, trainer = self.cfg, self.trainer
        return [
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
            ("budget", describe_budget(cfg)),
            ("opponents", describe_opponents(cfg)),
            ("milestones", _describe_milestones(cfg)),
            ("rewards", ", ".join(f"{k} {v:g}" for k, v in cfg.env.rewards.items())),
            *([("kickstart", describe_kickstart(cfg))] if cfg.ppo.kickstart_coef > 0 else []),
            ("owner / commit / config", f"{cfg.run.owner} / {git_commit() or '-'} / {config_hash(cfg)}"),
        ]  # fmt: skip

    def iterate(self) -> dict[str, Any]:
        trainer = self.trainer
        self.clock.start()
        batch, raw_obs, stats = trainer.collect()
        learn_start = time.perf_counter()
        metrics = trainer.update(batch, raw_obs)
        learn_seconds = time.perf_counter() - learn_start
        return summarize_iteration(trainer, stats, metrics, learn_seconds, 0.0)

    def between(self, record: dict[str, Any], console: Console) -> None:
        """Evaluation, pool metrics, milestones, then the schedule's phase and stage moves."""
        trainer, sp = self.trainer, self.cfg.selfplay
        if self.next_eval is not None and trainer.global_step >= self.next_eval:
            record.update(trainer.evaluate_vs_rule())
            self.next_eval = (trainer.global_step // sp.eval_interval_steps + 1) * sp.eval_interval_steps
        record.update(trainer.matchmaker.metrics())
        record["curriculum/stage"] = trainer.stage
        if isinstance(trainer.env, RocketLeagueVecEnv):
            record["charts/nan_resets"] = trainer.env.total_nan_resets
        record["charts/reward_phase"] = trainer.reward_phase
        trainer.matchmaker.flush()
        # with ratings on, the last iteration of a run that reaches its budget makes (and rates) a milestone
        # too, so the final policy can become the shipped bot (best.json)
        final = trainer.global_step >= self.cfg.run.total_steps and self._rating_on()
        if trainer.global_step >= self.next_milestone or final:
            self._milestone(record, console, replay=self.cfg.run.milestone_replays)
        self._last_record = record
        if sp.rate_milestones:
            record["perf/rating_share"] = self.rating_seconds_total / max(self.train_seconds(), 1e-9)
        for message in (trainer.advance_reward_phase(record), trainer.advance_curriculum()):
            if message:
                console.print(message, soft_wrap=True)

    def _milestone(self, record: dict[str, Any], console: Console, replay: bool) -> None:
        """Make a milestone of the policy now, rate it (it may become the shipped bot), tell the webhook."""
        trainer, sp = self.trainer, self.cfg.selfplay
        meta = {**checkpoint_meta(record), "phase": trainer.stage_name, "timestamp": time.time()}
        path = trainer.milestone({**meta, **self._clock_meta()})
        self.next_milestone = (trainer.global_step // sp.snapshot_interval_steps + 1) * sp.snapshot_interval_steps
        self._last_milestone_step = trainer.global_step
        rating = self._rate_milestone(path, record, console) if path is not None else None
        post_milestone(path, meta, trainer.matchmaker.learner_elo if rating is None else rating, console)
        if path is not None and replay:
            _milestone_replay(path, self.run_dir, console)

    def progress_fields(self, record: dict[str, Any]) -> dict[str, str]:
        return {
            "reward": _fmt(record["charts/episode_reward_mean"]),
            "extra": f"touches/min {_fmt(record['charts/touches_per_minute'])}",
        }

    def _rating_on(self) -> bool:
        return self.cfg.selfplay.rate_milestones and rating_unavailable(self.trainer.env_cfg.env) is None

    def _rate_milestone(self, path: Path, record: dict[str, Any], console: Console) -> float | None:
        """Rate the new milestone (:mod:`speedflip.selfplay.rating`), timed into ``perf/rating_seconds``;
        returns its Elo (``None``: off or not possible here; a rating never stops training)."""
        trainer = self.trainer
        if not self._rating_on():
            return None
        start = time.perf_counter()
        try:
            rated = rate_milestone(
                path, trainer.matchmaker.league, trainer.env_cfg.env, self.cfg.selfplay,
                self.cfg.run.seed + trainer.iteration, self.run_dir / "games.csv", self.train_seconds() / 60.0,
            )  # fmt: skip
        except (RatingError, CheckpointError) as err:
            console.print(f"note: milestone {path} not rated ({err})", soft_wrap=True)
            return None
        finally:
            seconds = time.perf_counter() - start
            self.rating_seconds_total += seconds
        record["perf/rating_seconds"] = seconds
        record["selfplay/milestone_elo"] = rated.rating
        console.print(f"milestone rated in {seconds:.1f} s: {rated.describe()}", soft_wrap=True)
        self._keep_best(path, rated.name, rated.rating, rated.anchor_score(), console)
        for note in rated.notes:
            console.print(f"note: {note}", soft_wrap=True)
        return rated.rating

    def _keep_best(self, path: Path, name: str, elo: float, anchor_score: float | None, console: Console) -> None:
        """Make the rated milestone the run's shipped bot (``best.json``) when it is the best so far by
        ``selfplay.ship_by`` and ``selfplay.ship_margin`` (:mod:`speedflip.selfplay.best`)."""
        candidate = BestMilestone(
            path=run_relative(path, self.run_dir), name=name, step=int(path.name), elo=elo,
            stage=self.trainer.stage_name, train_minutes=round(self.train_seconds() / 60.0, 3),
            anchor_score=None if anchor_score is None else round(anchor_score, 4),
        )  # fmt: skip
        try:
            if update_best(self.run_dir, candidate, self.cfg.selfplay.ship_by, self.cfg.selfplay.ship_margin):
                console.print(
                    f"best-rated milestone so far: {candidate.describe()}; speedflip eval/export {self.run_dir} "
                    f"use it ({self.run_dir}@latest: the newest checkpoint)",
                    soft_wrap=True,
                )
        except OSError as err:
            console.print(f"note: could not record the best milestone ({err}); training goes on", soft_wrap=True)

    def _final_pick(self, console: Console, run_dir: Path) -> None:
        """The last milestones against the anchors in longer games; the best becomes the shipped bot
        (:mod:`speedflip.selfplay.final_pick`); timed into the rating's seconds. It never fails the run."""
        trainer, sp = self.trainer, self.cfg.selfplay
        console.print(f"final pick: {describe_games(sp)} (a second Ctrl-C skips this)", soft_wrap=True)
        start = time.perf_counter()
        try:
            pick = final_pick(
                run_dir, trainer.stage_name, trainer.matchmaker.league, trainer.env_cfg.env, sp,
                self.cfg.run.seed + FINAL_PICK_SEED_OFFSET,
            )  # fmt: skip
        except (RatingError, CheckpointError, OSError) as err:
            console.print(f"note: no final pick ({err}); the rating's pick stands", soft_wrap=True)
            return
        finally:
            self.rating_seconds_total += time.perf_counter() - start
        if pick is None:
            console.print("note: no rated milestone in this stage to pick from", soft_wrap=True)
            return
        scores = "; ".join(f"{c.step:,}: {describe_candidate(c, pick.by)}" for c in pick.candidates)
        console.print(
            f"final pick in {pick.seconds:.1f} s ({scores}): {pick.picked.name} ships ({run_dir / FINAL_PICK_FILE})",
            soft_wrap=True,
        )

    def save(self, checkpoints_dir: Path, meta: dict[str, Any]) -> Path:
        return self.trainer.save(checkpoints_dir, {**meta, **self._clock_meta()})

    def finish(self, console: Console, run_dir: Path) -> None:
        """Rate the final policy of a run stopped before its budget (a milestone, so a stopped run can ship
        its last steps, as one that reaches its budget does), say what the rating cost and leave the league
        plot (``league.png``)."""
        from speedflip.selfplay.evaluate import write_plot

        step = self.trainer.global_step
        if self._last_record is not None and self._rating_on() and self._last_milestone_step != step:
            console.print(
                f"rating the final policy ({step:,} agent steps) as a milestone, so it can be the shipped bot "
                "(the checkpoint is saved; a second Ctrl-C skips this)",
                soft_wrap=True,
            )
            self._milestone(self._last_record, console, replay=False)
        if self.cfg.selfplay.final_pick_milestones > 0 and self._rating_on():
            self._final_pick(console, run_dir)

        if self.rating_seconds_total > 0:
            train = self.train_seconds()
            console.print(
                f"milestone rating: {self.rating_seconds_total:.1f} s of {train:.0f} s of training "
                f"({self.rating_seconds_total / max(train, 1e-9):.1%})"
            )
        best = read_best(run_dir)
        if best is not None:
            console.print(
                f"shipped bot: the best-rated milestone {best.describe()} (speedflip eval/export/watch {run_dir}; "
                f"{run_dir}@latest for the newest checkpoint)",
                soft_wrap=True,
            )
        plot = run_dir / "league.png"
        try:
            write_plot(self.trainer.matchmaker.league, plot)
        except OSError as err:
            console.print(f"note: no league plot ({err})", soft_wrap=True)
            return
        console.print(f"league: {plot} (table: speedflip league {run_dir})", soft_wrap=True)

    def close(self) -> None:
        try:
            if self.view is not None:
                self.view.close()
        finally:
            self.trainer.close()


def describe_kickstart(cfg: Config) -> str:
    """The start-up summary's line for ``ppo.kickstart_coef``: the teacher, the weight and how long it lasts."""
    ppo = cfg.ppo
    ends = [f"{ppo.kickstart_steps:,} agent steps"] if ppo.kickstart_steps is not None else []
    if ppo.kickstart_fraction is not None:
        ends.append(f"{ppo.kickstart_fraction * 100:g} % of the run")
    lasts = f"falling to 0 at {' or '.join(ends)}" if ends else "all run long"
    if len(ends) > 1:
        lasts += ", whichever comes first"
    released = (
        f"; then KL toward the policy as it was then, weight {ppo.release_kl_coef:g}" if ppo.release_kl_coef > 0 else ""
    )
    return f"toward the rule bot's action, weight {ppo.kickstart_coef:g}, {lasts}{released}"


def describe_opponents(cfg: Config) -> str:
    """The start-up summary's line for the opponent pool: the share of arenas and who fills it."""
    sp = cfg.selfplay
    staged = " (the curriculum's stages set their own share of arenas)" if cfg.curriculum.enabled else ""
    if sp.opponent_share == 0:
        return "self-play in every arena" + staged
    rule_share = sp.rule_share if sp.include_rule else None
    fixed = {"rule bot": rule_share or 0.0, "idle car": sp.idle_share}
    who = [f"{name} {share * 100:g} %" for name, share in fixed.items() if share > 0]
    rest = "milestones" + (" and the rule bot" if sp.include_rule and rule_share is None else "")
    if sum(fixed.values()) < 1.0:
        who.append(f"{rest} ({sp.sampling})" + (" the rest" if who else ""))
    return f"a pool in {sp.opponent_share * 100:g} % of arenas: {', '.join(who)}; self-play in the others{staged}"


def _describe_milestones(cfg: Config) -> str:
    sp = cfg.selfplay
    every = f"every {sp.snapshot_interval_steps:,} agent steps"
    if not sp.rate_milestones:
        return f"{every}, not rated (selfplay.rate_milestones=false)"
    return (f"{every}, rated in {sp.rating_games} games of {sp.rating_game_seconds:g} s vs the rule bot, idle and "
            f"up to {sp.rating_opponents} earlier milestones")  # fmt: skip


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
        num_actions = LookupTableAction(table_from_spec(env_cfg.action_table)).num_actions
    return compat_signature(
        obs_dim, num_actions, cfg.ppo.policy_layers, cfg.ppo.critic_layers, env_cfg.action_form, recurrent_spec(cfg)
    )


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
