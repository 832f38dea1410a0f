"""The league file (``league.json``: players and Elo ratings) and the game log (``games.csv``).

Fixed references (:data:`FIXED_RATINGS`) never move: the rule-based bot stays at 1000, so that
ratings from different runs and days are on one scale, and the idle car (never touches its controls)
at its measured rating below it (:data:`IDLE_RATING`), the floor of the scale.
"""

from __future__ import annotations

import csv
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speedflip.selfplay import elo

REFERENCE_PLAYER = "rule"
IDLE_PLAYER = "idle"
# Measured, not chosen: `speedflip eval rule idle --games 300 --game-seconds 30 --league /tmp/idle/league.json`
# (RocketSim 1v1 from kickoffs, sides swapped halfway, the milestone rating's game length; 2026-11-23 on an
# "Intel Xeon Processor" 2-core machine) gave the rule bot 273 wins, 27 draws, 0 losses: a score rate s of
# 0.955, so idle sits D = 400 * log10(s / (1 - s)) = 531 Elo below it (95% interval of s: 437-624 Elo): 469,
# rounded to 470. 100 games of 60 s gave 86 / 14 / 0 (449 Elo). Used for every team size.
IDLE_RATING = 470.0
FIXED_RATINGS: dict[str, float] = {REFERENCE_PLAYER: elo.INITIAL_RATING, IDLE_PLAYER: IDLE_RATING}
GAMES_FIELDS = [
    "time", "step", "player_a", "player_b", "team_size", "goals_a", "goals_b", "score_a",
    "a_is_blue", "touches_a", "touches_b", "shots_a", "shots_b", "saves_a", "saves_b", "seconds",
    "rating_a", "rating_b",
]  # fmt: skip


class LeagueError(RuntimeError):
    """A league file that cannot be read; the message says how to recover."""


@dataclass
class Player:
    name: str
    rating: float = elo.INITIAL_RATING
    games: int = 0
    step: int | None = None
    path: str | None = None
    history: list[tuple[int, float]] = field(default_factory=list)  # (games played, rating)
    train_minutes: float | None = None  # milestones: wall-clock minutes of training when made

    @property
    def is_milestone(self) -> bool:
        """A snapshot of a training run (its folder is ``milestones/<stage>/<step>/``)."""
        return self.path is not None and Path(self.path).parent.parent.name == "milestones"


@dataclass
class League:
    """Players and ratings, saved atomically to ``league.json``."""

    path: Path
    players: dict[str, Player] = field(default_factory=dict)
    k_factor: float = elo.DEFAULT_K
    recovery_note: str | None = None

    @classmethod
    def load(cls, path: Path) -> League:
        if not path.exists():
            league = cls(path)
            league.player(REFERENCE_PLAYER)
            return league
        try:
            data = json.loads(path.read_text())
            players = {
                name: Player(
                    name=name,
                    rating=FIXED_RATINGS.get(name, float(p["rating"])),
                    games=int(p.get("games", 0)),
                    step=p.get("step"),
                    path=p.get("path"),
                    history=[(int(g), float(r)) for g, r in p.get("history", [])],
                    train_minutes=None if p.get("train_minutes") is None else float(p["train_minutes"]),
                )
                for name, p in data["players"].items()
            }
            return cls(path, players, float(data.get("k_factor", elo.DEFAULT_K)))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, UnicodeDecodeError, AttributeError) as err:
            return cls._recover(path, f"{type(err).__name__}: {err}")

    @classmethod
    def _recover(cls, path: Path, problem: str) -> League:
        """Keep a corrupt league.json aside as ``.bad`` and rebuild the ratings from games.csv."""
        bad = path.with_name(path.name + ".bad")
        if bad.exists():
            bad = path.with_name(f"{path.name}.bad-{time.strftime('%Y%m%d-%H%M%S')}")
        path.rename(bad)
        league = cls(path)
        league.player(REFERENCE_PLAYER)
        games = path.with_name("games.csv")
        replayed = 0
        if games.exists():
            with games.open(newline="") as f:
                for row in csv.DictReader(f):
                    try:
                        league._replay(row)
                        replayed += 1
                    except (KeyError, ValueError, TypeError):
                        continue
        league._restore_milestones(path.parent / "milestones")
        league.recovery_note = (
            f"league file '{path}' was corrupt ({problem}); it was kept as '{bad}' and the ratings were "
            f"rebuilt from {replayed} games in '{games}'"
        )
        league.save()
        return league

    def _restore_milestones(self, milestones_dir: Path) -> None:
        """After a rebuild: the folder and training minutes of milestone players (not in games.csv) from
        ``milestones/<stage>/<step>/meta.json``."""
        for p in self.players.values():
            stage, sep, step = p.name.rpartition("@")
            folder = milestones_dir / stage / step
            if not sep or not (folder / "meta.json").is_file():
                continue
            p.path = p.path or str(folder)
            try:
                seconds = json.loads((folder / "meta.json").read_text()).get("train_seconds")
            except (OSError, ValueError, AttributeError):
                continue
            if isinstance(seconds, (int, float)):
                p.train_minutes = float(seconds) / 60.0

    def player(
        self, name: str, step: int | None = None, path: str | None = None, train_minutes: float | None = None
    ) -> Player:
        """The player ``name`` (created at its fixed rating or 1000); fills a missing step, path or minutes."""
        if name not in self.players:
            self.players[name] = Player(name, rating=FIXED_RATINGS.get(name, elo.INITIAL_RATING), step=step, path=path)
        found = self.players[name]
        found.step = found.step if found.step is not None else step
        found.path = found.path or path
        found.train_minutes = found.train_minutes if found.train_minutes is not None else train_minutes
        return found

    def record(self, name_a: str, name_b: str, score_a: float) -> tuple[float, float]:
        """Update both ratings for one game (fixed references never move, see :data:`FIXED_RATINGS`);
        returns them."""
        a, b = self.player(name_a), self.player(name_b)
        new_a, new_b = elo.update(a.rating, b.rating, score_a, self.k_factor)
        if a.name not in FIXED_RATINGS:
            a.rating = new_a
        if b.name not in FIXED_RATINGS:
            b.rating = new_b
        self._count_game(a, b)
        return a.rating, b.rating

    def record_rated(self, name_a: str, name_b: str, rating_a: float) -> tuple[float, float]:
        """Count one game in which A's rating was computed elsewhere (a milestone's performance rating,
        :mod:`speedflip.selfplay.rating`): A gets ``rating_a``, B keeps its rating; returns both."""
        if name_a in FIXED_RATINGS:
            raise ValueError(f"'{name_a}' is a fixed reference; its rating is {FIXED_RATINGS[name_a]:g} by definition")
        a, b = self.player(name_a), self.player(name_b)
        a.rating = float(rating_a)
        self._count_game(a, b)
        return a.rating, b.rating

    @staticmethod
    def _count_game(a: Player, b: Player) -> None:
        for p in (a, b):
            p.games += 1
            p.history.append((p.games, round(p.rating, 2)))

    def _replay(self, row: dict[str, str]) -> None:
        """Apply one games.csv row. Rows written by speedflip carry the ratings after the game, which
        are restored as they are (exact whatever K factor or starting ratings were used); rows without
        them are replayed with Elo at this league's K factor."""
        a = self.player(row["player_a"], step=int(row["step"]) if row.get("step") else None)
        b = self.player(row["player_b"], step=_step_from_name(row["player_b"]))
        if not row.get("rating_a") or not row.get("rating_b"):
            self.record(a.name, b.name, float(row["score_a"]))
            return
        for p, rating in ((a, row["rating_a"]), (b, row["rating_b"])):
            p.rating = FIXED_RATINGS.get(p.name, float(rating))
        self._count_game(a, b)

    def save(self) -> None:
        data: dict[str, Any] = {
            "k_factor": self.k_factor,
            "reference": REFERENCE_PLAYER,
            "fixed_ratings": FIXED_RATINGS,
            "players": {
                name: {
                    "rating": p.rating,
                    "games": p.games,
                    "step": p.step,
                    "path": p.path,
                    "train_minutes": p.train_minutes,
                    "history": p.history,
                }
                for name, p in self.players.items()
            },
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, self.path)

    def table(self) -> list[Player]:
        return sorted(self.players.values(), key=lambda p: p.rating, reverse=True)


def _step_from_name(name: str) -> int | None:
    """``main@3072`` -> 3072 (snapshot names carry their step)."""
    _, sep, tail = name.rpartition("@")
    return int(tail) if sep and tail.isdigit() else None


def append_games(path: Path, rows: list[dict[str, Any]]) -> None:
    """Append rated games to ``games.csv`` (header written once; an empty file counts as new)."""
    new = not path.exists() or path.stat().st_size == 0
    if not new:
        with path.open(newline="") as f:
            header = next(csv.reader(f), None)
        if header != GAMES_FIELDS:
            raise LeagueError(
                f"'{path}' does not have the games.csv header speedflip writes; it was left untouched. "
                f"Move it aside (mv {path} {path}.bad) and run again."
            )
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=GAMES_FIELDS)
        if new:
            writer.writeheader()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        for row in rows:
            writer.writerow({"time": stamp, **{k: row.get(k) for k in GAMES_FIELDS if k != "time"}})
