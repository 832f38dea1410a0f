"""The final pick: when a run ends, its last milestones replay longer and more games against the anchors and the
best of them becomes the shipped bot (``best.json``).

As training goes, every milestone is rated in ``selfplay.rating_games`` short games per opponent (8 of 30 s):
enough for an Elo curve, not to tell neighbouring milestones apart. Played as exported (the most likely action),
milestones 1M agent steps apart differ by up to 45 wins of 100 against the rule bot, and the newest one is often
not the best. With ``selfplay.final_pick_milestones`` N > 0 the run ends by playing each of its stage's last N
milestones ``selfplay.final_pick_games`` games of ``selfplay.final_pick_game_seconds`` against the rule bot and
against the idle car (half on each side, the same games for every milestone: one seed); the highest score rate
(a win 1, a draw 0.5, both anchors together; a tie goes to the newer milestone) is shipped, whatever the rating
picked. Every candidate's score is kept in ``final_pick.json``. Only milestones the league knows (rated in
training) take part: the shipped bot keeps its Elo. docs/learning.md (thirty-fourth session) has the measurement.

``selfplay.final_pick_by: own_goal_veto`` asks a narrower question. As exported, one milestone can put the ball
into its own net against a car that never moves in a third of its games while the milestones just before it
never do (the argmax of one set of weights; docs/learning.md, fifty-eighth session). The rating's shipped bot
plays the idle car first; it stays unless it scores an own goal. Then the last N milestones play the same games,
newest first, and the first with no own goal ships (none without: the fewest, the newer of equal ones).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from speedflip.config import ConfigError, EnvConfig, SelfPlayConfig, build_config
from speedflip.schedule import stage_config
from speedflip.selfplay.best import BestMilestone, read_best, run_relative, write_best, write_run_json
from speedflip.selfplay.league import IDLE_PLAYER, League
from speedflip.selfplay.policies import checkpoint_meta
from speedflip.selfplay.rating import anchor_games, idle_own_goals

FINAL_PICK_FILE = "final_pick.json"
# the pick's games are seeded run.seed + this: other kickoffs than `speedflip eval`'s default (--seed 0) plays
FINAL_PICK_SEED_OFFSET = 7
DEFAULT_PICK_MILESTONES = 8  # `speedflip pick` of a run trained without the final pick (the `1v1` preset's count)


@dataclass(frozen=True)
class Candidate:
    """One milestone's games against the anchors in the final pick."""

    name: str  # league name, e.g. main@22007808
    step: int
    path: Path
    points: dict[str, float]  # anchor -> points (win 1, draw 0.5)
    games: dict[str, int]  # anchor -> games
    own_goals: dict[str, int] = field(default_factory=dict)  # anchor -> own goals (own_goal_veto only)

    @property
    def score(self) -> float:
        """Score rate over both anchors' games."""
        return sum(self.points.values()) / max(1, sum(self.games.values()))


@dataclass(frozen=True)
class FinalPick:
    """The outcome of :func:`final_pick`."""

    candidates: list[Candidate]
    picked: Candidate
    seconds: float
    games: int
    game_seconds: float
    seed: int
    by: str = "score"  # selfplay.final_pick_by

    def as_dict(self, run_dir: Path) -> dict[str, Any]:
        def entry(c: Candidate) -> dict[str, Any]:
            return {"name": c.name, "step": c.step, "path": run_relative(c.path, run_dir), "score": round(c.score, 4),
                    "points": c.points, "games": c.games, "own_goals": c.own_goals}  # fmt: skip

        return {
            "by": self.by, "picked": entry(self.picked), "candidates": [entry(c) for c in self.candidates],
            "games_per_anchor": self.games, "game_seconds": self.game_seconds, "seed": self.seed,
            "seconds": round(self.seconds, 2),
        }  # fmt: skip


def pick_best(candidates: list[Candidate]) -> Candidate:
    """The candidate with the highest score rate; of equal ones the newest (highest step)."""
    if not candidates:
        raise ValueError("no candidates to pick from")
    return max(candidates, key=lambda c: (c.score, c.step))


def veto_order(rating_pick: Path | None, last: list[Path]) -> list[Path]:
    """The order the own-goal veto plays milestones in: the rating's shipped bot, then ``last`` newest first
    (each milestone once)."""
    order = [] if rating_pick is None else [rating_pick]
    return order + [p for p in reversed(last) if all(p.name != q.name for q in order)]


def pick_without_own_goal(candidates: list[Candidate]) -> Candidate:
    """The first candidate (in the order played) with no own goal; when every one scored some, the fewest, and
    of equal ones the newest."""
    if not candidates:
        raise ValueError("no candidates to pick from")
    for candidate in candidates:
        if sum(candidate.own_goals.values()) == 0:
            return candidate
    return min(candidates, key=lambda c: (sum(c.own_goals.values()), -c.step))


def stage_milestones(run_dir: Path, stage: str, league: League) -> list[Path]:
    """The folders of ``milestones/<stage>/`` the league rated, oldest first."""
    folder = run_dir / "milestones" / stage
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and p.name.isdigit() and f"{stage}@{p.name}" in league.players]
    return sorted(found, key=lambda p: int(p.name))


def final_pick(
    run_dir: Path, stage: str, league: League, env: EnvConfig, sp: SelfPlayConfig, seed: int
) -> FinalPick | None:
    """Play the stage's last ``sp.final_pick_milestones`` rated milestones against the anchors, make the best the
    shipped bot (``best.json``) and write every score to ``final_pick.json`` (see the module docstring).
    ``None`` when the stage has no rated milestone. Raises :class:`~speedflip.selfplay.rating.RatingError` when
    a milestone cannot play here and ``OSError`` when the run directory cannot be written."""
    paths = stage_milestones(run_dir, stage, league)[-sp.final_pick_milestones :]
    if not paths:
        return None
    if sp.final_pick_by == "own_goal_veto":
        return _own_goal_veto(run_dir, stage, league, env, sp, seed, paths)
    start = time.perf_counter()
    candidates = []
    for path in paths:
        points, games = anchor_games(path, env, sp.final_pick_games, sp.final_pick_game_seconds, seed)
        candidates.append(Candidate(f"{stage}@{path.name}", int(path.name), path, points, games))
    picked = pick_best(candidates)
    pick = FinalPick(
        candidates, picked, time.perf_counter() - start, sp.final_pick_games, sp.final_pick_game_seconds, seed
    )
    player = league.players[picked.name]
    score = round(picked.score, 4)
    write_best(
        run_dir,
        BestMilestone(
            path=run_relative(picked.path, run_dir), name=picked.name, step=picked.step, elo=player.rating, stage=stage,
            train_minutes=player.train_minutes, anchor_score=score, stage_best_score=score,
        ),
    )  # fmt: skip
    write_run_json(run_dir, FINAL_PICK_FILE, pick.as_dict(run_dir))
    return pick


def _own_goal_veto(
    run_dir: Path, stage: str, league: League, env: EnvConfig, sp: SelfPlayConfig, seed: int, last: list[Path]
) -> FinalPick:
    """``final_pick_by: own_goal_veto`` (see the module docstring): ``best.json`` is rewritten only when the
    rating's shipped bot scored an own goal against the idle car and another milestone ships."""
    start = time.perf_counter()
    best = read_best(run_dir)
    rating_pick = None
    if best is not None and best.stage == stage and best.name in league.players and best.folder(run_dir).is_dir():
        rating_pick = best.folder(run_dir)
    candidates: list[Candidate] = []
    for path in veto_order(rating_pick, last):
        own_goals, points = idle_own_goals(path, env, sp.final_pick_games, sp.final_pick_game_seconds, seed)
        candidates.append(
            Candidate(f"{stage}@{path.name}", int(path.name), path, {IDLE_PLAYER: points},
                      {IDLE_PLAYER: sp.final_pick_games}, {IDLE_PLAYER: own_goals})
        )  # fmt: skip
        if own_goals == 0:
            break
    picked = pick_without_own_goal(candidates)
    pick = FinalPick(
        candidates, picked, time.perf_counter() - start, sp.final_pick_games, sp.final_pick_game_seconds, seed,
        by="own_goal_veto",
    )  # fmt: skip
    if best is None or picked.name != best.name:
        player = league.players[picked.name]
        write_best(
            run_dir,
            BestMilestone(
                path=run_relative(picked.path, run_dir), name=picked.name, step=picked.step, elo=player.rating,
                stage=stage, train_minutes=player.train_minutes, anchor_score=None,
                stage_best_score=best.reference_score() if best is not None and best.stage == stage else None,
            ),
        )  # fmt: skip
    write_run_json(run_dir, FINAL_PICK_FILE, pick.as_dict(run_dir))
    return pick


def describe_games(sp: SelfPlayConfig) -> str:
    """What the final pick plays, for the console."""
    games = f"{sp.final_pick_games} games of {sp.final_pick_game_seconds:g} s"
    if sp.final_pick_by == "own_goal_veto":
        return (
            f"own-goal veto: the shipped bot and then the last {sp.final_pick_milestones} milestones (newest first) "
            f"play {games} against the idle car until one scores no own goal"
        )
    return f"the last {sp.final_pick_milestones} milestones, {games} against the rule bot and the idle car each"


def describe_candidate(candidate: Candidate, by: str) -> str:
    """One candidate's games, for the console."""
    if by == "own_goal_veto":
        games = sum(candidate.games.values())
        return f"{sum(candidate.own_goals.values())} own goals in {games} games against the idle car"
    per_anchor = ", ".join(f"{k} {candidate.points[k]:g}/{candidate.games[k]}" for k in candidate.games)
    return f"{candidate.score:.3f} ({per_anchor})"


def run_pick(
    run: str,
    milestones: int | None,
    games: int | None,
    game_seconds: float | None,
    seed: int | None,
    console: Console,
    by: str | None = None,
) -> int:
    """``speedflip pick RUN``: the final pick on a finished run (its settings unless given), for runs trained
    without it or to pick again with more games. The stage is the one ``best.json`` names, else the run's only
    one. Bad input (no run, no league, an unknown stage) is a :class:`~speedflip.config.ConfigError`."""
    if milestones is not None and milestones < 1:
        raise ConfigError(f"--milestones must be at least 1, got {milestones}")
    run_dir = Path(run)
    milestones_dir = run_dir / "milestones"
    stages = sorted(p.name for p in milestones_dir.iterdir() if p.is_dir()) if milestones_dir.is_dir() else []
    if not (run_dir / "league.json").is_file() or not stages:
        raise ConfigError(
            f"'{run}' is not a run directory with rated milestones (league.json and milestones/<stage>/): pass the "
            "--run-dir of a `speedflip train` run that rated its milestones (selfplay.rate_milestones)"
        )
    best = read_best(run_dir)
    if best is not None and best.stage in stages:
        stage = best.stage
    elif len(stages) == 1:
        stage = stages[0]
    else:
        raise ConfigError(f"'{run}' has milestones of the stages {', '.join(stages)} and no best.json naming one")
    league = League.load(run_dir / "league.json")
    newest = stage_milestones(run_dir, stage, league)
    if not newest:
        raise ConfigError(f"no milestone of stage '{stage}' in '{run}' was rated: nothing to pick from")
    meta = checkpoint_meta(newest[-1])
    config = meta.get("config")
    stage_index = meta.get("stage")
    if not isinstance(config, dict) or not isinstance(stage_index, int):
        raise ConfigError(f"'{newest[-1] / 'meta.json'}' holds no run config: not a speedflip milestone")
    cfg = stage_config(build_config(config, source=str(newest[-1] / "meta.json")), stage_index)
    updates = {
        "final_pick_milestones": milestones, "final_pick_games": games, "final_pick_game_seconds": game_seconds,
        "final_pick_by": by,
    }  # fmt: skip
    data = {**cfg.selfplay.model_dump(), **{k: v for k, v in updates.items() if v is not None}}
    sp = build_config({**cfg.model_dump(), "selfplay": data}, source="speedflip pick").selfplay
    if sp.final_pick_milestones == 0:
        sp = sp.model_copy(update={"final_pick_milestones": DEFAULT_PICK_MILESTONES})
    pick_seed = cfg.run.seed + FINAL_PICK_SEED_OFFSET if seed is None else seed
    console.print(f"final pick of {run}, stage '{stage}': {describe_games(sp)}, seed {pick_seed}", soft_wrap=True)
    before = best.name if best is not None else None
    pick = final_pick(run_dir, stage, league, cfg.env, sp, pick_seed)
    assert pick is not None  # the stage has a rated milestone
    for c in pick.candidates:
        mark = "  <- ships" if c is pick.picked else ""
        console.print(f"  {c.name}: {describe_candidate(c, pick.by)}{mark}")
    console.print(
        f"{pick.picked.name} ships (best.json; before: {before or 'none'}); every score in {run_dir / FINAL_PICK_FILE} "
        f"({pick.seconds:.1f} s)",
        soft_wrap=True,
    )
    return 0
