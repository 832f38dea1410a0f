"""``speedflip eval A B`` and ``speedflip league RUN``: rated head-to-head matches and the table."""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from speedflip.checkpoint import CheckpointError, describe_lineage, run_lineage, verify_checkpoint
from speedflip.env.vec_env import RocketLeagueVecEnv
from speedflip.jsonsafe import dumps
from speedflip.selfplay.best import best_checkpoint, read_best
from speedflip.selfplay.league import FIXED_RATINGS, League, append_games
from speedflip.selfplay.league import Player as LeaguePlayer
from speedflip.selfplay.match import (
    OBS_KEYS,
    OBSERVATION_KEYS,
    SCRIPTED_TICK_SKIP,
    OwnGoal,
    Player,
    match_env_config,
    play_match,
    summarize,
)
from speedflip.selfplay.matchmaker import LEARNER
from speedflip.selfplay.policies import EnsemblePolicy, NeuralPolicy, ensemble_spec, find_checkpoint, resolve_policy
from speedflip.selfplay.userbot import UserBotPolicy

BUILTIN = ("rule", "random", "idle")


def resolve_player(spec: str, env: RocketLeagueVecEnv, seed: int, deterministic: bool) -> Player:
    """A policy name, run dir, checkpoint, or ``py:FILE:FUNC`` user bot.

    A checkpoint plays with the lookup table it was trained with, whatever ``env``'s table is (the
    match decodes it, see :mod:`speedflip.selfplay.match`); built-in players use ``env``'s table.
    """
    if spec.startswith("py:"):
        return UserBotPolicy(spec)
    return resolve_policy(spec, env.obs_dim, env.actions.table, seed=seed, deterministic=deterministic, own_table=True)


def training_obs_options(*specs: str) -> dict[str, object]:
    """The settings the neural players were trained with (see :data:`~speedflip.selfplay.match.OBS_KEYS`):
    their observation settings, which must agree (one env observes for both sides), and the
    ``action_table`` of the first of them (the match env's table; a player trained with another
    table is decoded with its own)."""
    found: dict[str, object] | None = None
    table: dict[str, object] = {}
    for spec in specs:
        if spec in BUILTIN or spec.startswith("py:"):
            continue
        meta = verify_checkpoint(find_checkpoint(spec))
        env = meta.get("config", {}).get("env", {})
        options = {k: env[k] for k in OBSERVATION_KEYS if k in env}
        if found is not None and options != found:
            raise CheckpointError(
                f"the two players were trained with different observation settings ({found} vs {options}); "
                "a match gives both sides the same observations, so rate each against rule/idle instead"
            )
        found = options
        if not table and "action_table" in env:
            table = {"action_table": env["action_table"]}
    if found is None:
        return {}
    return {**found, **{k: v for k, v in table.items() if k in OBS_KEYS}}


def shipped_note(spec: str) -> str | None:
    """For a run directory whose best-rated milestone plays: which one, and how to play the newest instead."""
    run = Path(spec)
    if spec in BUILTIN or not run.is_dir() or (run / "meta.json").is_file():
        return None
    ensemble = ensemble_spec(spec)
    if ensemble is not None:
        return (
            f"{spec}: its last {ensemble[1]} milestones play as one bot (selfplay.ship_ensemble), the bot `speedflip "
            f"export` ships; {spec}@best plays its best-rated milestone, {spec}@latest the newest checkpoint"
        )
    best = read_best(run)
    if best is None or best_checkpoint(run) is None:
        return None
    return (
        f"{spec}: its best-rated milestone plays, {best.describe()}, the bot `speedflip export` ships; "
        f"{spec}@latest plays the newest checkpoint"
    )


def decision_ticks(specs: tuple[str, str], options: dict[str, object]) -> tuple[int, int]:
    """Physics ticks between decisions of each player: a checkpoint's trained ``tick_skip`` (``options``, from
    :func:`training_obs_options`), :data:`~speedflip.selfplay.match.SCRIPTED_TICK_SKIP` for the rule bot, the
    random player and user bots; the idle car, which never acts, takes the other player's."""
    trained = options.get("tick_skip", SCRIPTED_TICK_SKIP)
    assert isinstance(trained, int)
    own = [
        None if spec == "idle" else SCRIPTED_TICK_SKIP if spec in BUILTIN or spec.startswith("py:") else trained
        for spec in specs
    ]
    a = own[0] if own[0] is not None else own[1] if own[1] is not None else SCRIPTED_TICK_SKIP
    b = own[1] if own[1] is not None else a
    return a, b


def _refuse_recurrent_repeats(players: tuple[Player, Player], ticks: tuple[int, int], env_tick: int) -> None:
    """A recurrent network steps its memory at every call, so it cannot sit out env steps between decisions."""
    for player, player_ticks in zip(players, ticks, strict=True):
        if player_ticks != env_tick and isinstance(player, NeuralPolicy | EnsemblePolicy) and player.recurrent:
            raise CheckpointError(
                f"{player.name} is a recurrent policy trained at env.tick_skip={player_ticks}; against a scripted "
                f"player deciding every {SCRIPTED_TICK_SKIP} ticks the match would step {env_tick} ticks at a time and "
                "it cannot repeat its actions in between: play it against another checkpoint of its run, or train it "
                f"at a tick_skip that divides {SCRIPTED_TICK_SKIP}"
            )


def league_dir_for(spec_a: str, league_path: str | None) -> Path:
    """Where ratings go: ``--league``, else run A's folder, else ``runs/``."""
    if league_path:
        return Path(league_path)
    run, _, tail = spec_a.rpartition("@")
    a = Path(run if (tail in ("best", "latest") or ensemble_spec(spec_a) is not None) and run else spec_a)
    if spec_a not in BUILTIN and a.is_dir() and (a / "checkpoints").is_dir():
        return a / "league.json"
    return Path("runs") / "league.json"


def action_mode(deterministic: bool) -> str:
    """How neural players chose their actions: ``deterministic`` (the most likely one, as an exported
    bot plays; the default) or ``stochastic`` (sampled, ``--stochastic``)."""
    return "deterministic" if deterministic else "stochastic"


def action_mode_text(deterministic: bool) -> str:
    if deterministic:
        return "neural players take their most likely action (deterministic, as an exported bot plays)"
    return "neural players sample their actions (stochastic)"


def run_eval(
    spec_a: str,
    spec_b: str,
    games: int,
    team_size: int,
    game_seconds: float,
    seed: int,
    deterministic: bool,
    league_path: str | None,
    json_path: str | None,
    console: Console,
) -> int:
    options = training_obs_options(spec_a, spec_b)
    ticks = decision_ticks((spec_a, spec_b), options)
    env_tick = math.gcd(*ticks)  # each player decides on its own cadence (speedflip.selfplay.match)
    if ticks[0] != ticks[1]:
        options = {**options, "tick_skip": env_tick}
    env = RocketLeagueVecEnv(match_env_config(games, team_size, game_seconds, obs_options=options), seed=seed)
    try:
        policy_a = resolve_player(spec_a, env, seed, deterministic)
        policy_b = resolve_player(spec_b, env, seed + 1, deterministic)
        _refuse_recurrent_repeats((policy_a, policy_b), ticks, env_tick)
        neural = any(isinstance(p, NeuralPolicy | EnsemblePolicy) for p in (policy_a, policy_b))
        console.print(
            f"{policy_a.name} vs {policy_b.name}: {games} games of {game_seconds:g} s, {team_size}v{team_size}, "
            "sides swapped halfway" + (f"; {action_mode_text(deterministic)}" if neural else "")
        )
        if ticks[0] != ticks[1]:
            console.print(
                f"A decides every {ticks[0]} ticks, B every {ticks[1]} (each at its own cadence; the match steps "
                f"{env_tick} ticks at a time)"
            )
        for spec in (spec_a, spec_b):
            shipped = shipped_note(spec)
            if shipped:
                console.print(shipped, soft_wrap=True)
        own_goal_log: list[OwnGoal] = []
        results = play_match(
            env, policy_a, policy_b, game_seconds, own_goal_log=own_goal_log,
            decision_ticks=ticks if ticks[0] != ticks[1] else None,
        )  # fmt: skip
    finally:
        env.close()
    summary = summarize(results)
    upfield = [sum(g.car_upfield for g in own_goal_log if g.conceded_by_a == by_a) for by_a in (True, False)]

    league = League.load(league_dir_for(spec_a, league_path))
    if league.recovery_note:
        console.print(f"[yellow]{escape(league.recovery_note)}[/yellow]")
    for policy in (policy_a, policy_b):
        if isinstance(policy, NeuralPolicy):
            league.player(policy.name, step=policy.global_step, path=str(policy.path))
        elif isinstance(policy, EnsemblePolicy):  # no path: an ensemble is not a milestone the pool could load
            league.player(policy.name, step=policy.global_step)
        else:
            league.player(policy.name)
    before = (league.player(policy_a.name).rating, league.player(policy_b.name).rating)
    step = policy_a.global_step if isinstance(policy_a, NeuralPolicy | EnsemblePolicy) else None
    rows = []
    for r in results:
        rating_a, rating_b = league.record(policy_a.name, policy_b.name, r.score_a)
        rows.append({**r.as_dict(), "step": step, "player_a": policy_a.name, "player_b": policy_b.name,
                     "team_size": team_size, "rating_a": rating_a, "rating_b": rating_b})  # fmt: skip
    league.save()
    append_games(league.path.with_name("games.csv"), rows)
    after = (league.player(policy_a.name).rating, league.player(policy_b.name).rating)

    table = Table(title=f"{policy_a.name} (A) vs {policy_b.name} (B)", title_justify="left")
    for col in ("", "A", "B"):
        table.add_column(col)
    table.add_row("wins / draws / losses (A)", f"{summary.wins} / {summary.draws} / {summary.losses}", "")
    table.add_row(
        "A score rate (95% CI)",
        f"{summary.score_rate:.2f} ({summary.interval_low:.2f}-{summary.interval_high:.2f})",
        "",
    )
    table.add_row(
        "distinct games (deterministic play repeats games)", f"{summary.distinct_games} of {summary.games}", ""
    )
    table.add_row("goals", str(summary.goals_a), str(summary.goals_b))
    table.add_row("games without a goal", str(summary.scoreless_a), str(summary.scoreless_b))
    table.add_row("own goals (conceded off the own last touch)", str(summary.own_goals_a), str(summary.own_goals_b))
    table.add_row("  of them touched last from upfield of the ball", str(upfield[0]), str(upfield[1]))
    table.add_row("shots", str(summary.shots_a), str(summary.shots_b))
    table.add_row("saves", str(summary.saves_a), str(summary.saves_b))
    table.add_row("touches", str(summary.touches_a), str(summary.touches_b))
    table.add_row("Elo", f"{before[0]:.0f} -> {after[0]:.0f}", f"{before[1]:.0f} -> {after[1]:.0f}")
    console.print(table)
    console.print(f"ratings: {league.path}, games: {league.path.with_name('games.csv')}")
    if json_path:
        payload = {
            "player_a": policy_a.name,
            "player_b": policy_b.name,
            **asdict(summary),
            "win_rate": summary.wins / max(summary.games, 1),
            "action_mode": action_mode(deterministic),
            "deterministic": deterministic,
            "elo_a": after[0],
            "elo_b": after[1],
            "tick_skip_a": ticks[0],
            "tick_skip_b": ticks[1],
            "games_detail": [r.as_dict() for r in results],
            "own_goals_detail": [g.as_dict() for g in own_goal_log],
        }
        Path(json_path).write_text(dumps(payload, indent=2))
    return 0


def run_league(run: str, plot: str | None, console: Console) -> int:
    """Print the Elo table of a run dir's (or a ``league.json``'s) league and write its plot."""
    path = Path(run) / "league.json" if Path(run).is_dir() else Path(run)
    if not path.exists():
        console.print(f"no league table at {path} yet: rate checkpoints with `speedflip eval {run} rule`")
        return 1
    league = League.load(path)
    if league.recovery_note:
        console.print(f"[yellow]{escape(league.recovery_note)}[/yellow]")
    table = Table(title=f"league {path}", title_justify="left")
    for col in ("rank", "player", "Elo", "games", "step", "minutes"):
        table.add_column(col)
    for rank, p in enumerate(league.table(), 1):
        fixed = " (fixed)" if p.name in FIXED_RATINGS else ""
        table.add_row(
            str(rank), p.name + fixed, f"{p.rating:.0f}", str(p.games), "-" if p.step is None else f"{p.step:,}",
            "-" if p.train_minutes is None else f"{p.train_minutes:.1f}",
        )  # fmt: skip
    console.print(table)
    lineage = run_lineage(path.parent)
    if lineage:
        console.print(f"this run started from: {escape(describe_lineage(lineage))}", soft_wrap=True)
    out = Path(plot) if plot else path.with_name("league.png")
    if write_plot(league, out):
        console.print(f"rating plot: {out}")
    return 0


def write_plot(league: League, out: Path) -> bool:
    """Elo against agent steps (left) and wall-clock minutes of training (right), PNG via matplotlib's Agg.

    One line for the run's rated milestones, horizontal lines for the fixed references (the rule bot and
    the idle car); other players with a step (checkpoints rated with ``speedflip eval``) are points on the
    left, one colour per run. Players without a step (the learner's pool rating, user bots, random) are
    in the table only.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_step, by_time) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    rated = [p for p in league.players.values() if p.games and p.step is not None and p.name not in FIXED_RATINGS]
    milestones = sorted((p for p in rated if p.is_milestone), key=lambda p: p.step or 0)
    if milestones:
        label = f"milestones (newest {milestones[-1].rating:.0f})"
        by_step.plot([p.step or 0 for p in milestones], [p.rating for p in milestones], marker="o", ms=3, label=label)
        timed = [(p.train_minutes, p.rating) for p in milestones if p.train_minutes is not None]
        by_time.plot([t for t, _ in timed], [r for _, r in timed], marker="o", ms=3, label=label)
    runs: dict[str, list[LeaguePlayer]] = {}
    for p in rated:
        if not p.is_milestone and p.name != LEARNER:
            runs.setdefault(p.name.rpartition("@")[0] or p.name, []).append(p)
    for run, players in runs.items():
        by_step.scatter([p.step or 0 for p in players], [p.rating for p in players], marker="x", label=run)
    for (name, rating), colour in zip(FIXED_RATINGS.items(), ("tab:red", "tab:gray"), strict=True):
        for ax in (by_step, by_time):
            ax.axhline(rating, color=colour, ls="--", lw=1, label=f"{name} (fixed {rating:.0f})")
    by_step.set_xlabel("agent steps")
    by_time.set_xlabel("training minutes (wall clock)")
    by_step.set_ylabel("Elo")
    for ax in (by_step, by_time):
        ax.grid(alpha=0.3)
    by_step.legend(loc="best", fontsize="small")
    fig.suptitle(f"league {league.path}", fontsize="small")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True
