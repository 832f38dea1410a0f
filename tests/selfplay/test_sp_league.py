"""league.json and games.csv: round trip, the fixed reference player, recovery from a corrupt file."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from speedflip.selfplay import elo
from speedflip.selfplay.league import GAMES_FIELDS, REFERENCE_PLAYER, League, LeagueError, append_games


def _row(a: str, b: str, score: float, step: int | None = None) -> dict[str, Any]:
    goals = {1.0: (1, 0), 0.5: (0, 0), 0.0: (0, 1)}[score]
    return {"step": step, "player_a": a, "player_b": b, "team_size": 1, "goals_a": goals[0], "goals_b": goals[1],
            "score_a": score, "a_is_blue": True}  # fmt: skip


def test_new_league_has_the_reference_player(tmp_path: Path) -> None:
    league = League.load(tmp_path / "league.json")
    assert list(league.players) == [REFERENCE_PLAYER]
    assert league.players[REFERENCE_PLAYER].rating == elo.INITIAL_RATING == 1000.0
    assert league.recovery_note is None
    assert not (tmp_path / "league.json").exists()  # loading does not write


def test_record_save_load_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "league.json"
    league = League.load(path)
    league.k_factor = 16.0
    league.player("run@128", step=128, path="/x/checkpoints/128")
    league.record("run@128", "random", 1.0)  # equal ratings, K=16: +8 / -8
    league.record("run@128", "random", 0.5)
    league.record("rule", "run@128", 0.0)
    league.save()
    assert path.is_file() and not list(path.parent.glob(".league.json.tmp-*"))  # written atomically

    loaded = League.load(path)
    assert loaded.recovery_note is None
    assert loaded.k_factor == 16.0
    assert set(loaded.players) == {"rule", "run@128", "random"}
    for name, p in league.players.items():
        q = loaded.players[name]
        assert (q.rating, q.games, q.step, q.path, q.history) == (p.rating, p.games, p.step, p.path, p.history)
    assert loaded.players["run@128"].step == 128 and loaded.players["run@128"].path == "/x/checkpoints/128"
    assert loaded.players["run@128"].games == 3 and loaded.players["random"].games == 2
    # first game by hand: 1000 vs 1000 win, K=16 -> 1008 / 992
    assert loaded.players["run@128"].history[0] == (1, 1008.0)
    assert loaded.players["random"].history[0] == (1, 992.0)
    assert [p.name for p in loaded.table()] == sorted(loaded.players, key=lambda n: -loaded.players[n].rating)


def test_reference_player_never_moves(tmp_path: Path) -> None:
    league = League(tmp_path / "league.json")
    opponent = 1000.0
    for score in (1.0, 1.0, 0.0, 0.5, 1.0):  # rule wins, wins, loses, draws, wins
        league.record(REFERENCE_PLAYER, "bot", score)
        # the opponent moves by the full Elo delta as if rule were an ordinary 1000 player
        _, opponent = elo.update(1000.0, opponent, score, 32.0)
        assert league.players["rule"].rating == 1000.0
        assert league.players["bot"].rating == pytest.approx(opponent)
    # from the other side too
    league.record("bot", REFERENCE_PLAYER, 1.0)
    assert league.players["rule"].rating == 1000.0
    assert league.players["rule"].games == 6
    # first game by hand: bot 1000 loses to rule 1000, K=32: 1000 - 16 = 984
    assert league.players["bot"].history[0] == (1, 984.0)


def _replay(rows: list[dict[str, Any]], k: float = elo.DEFAULT_K) -> dict[str, float]:
    """Ratings from replaying ``rows`` with elo.update, everyone starting at 1000, rule held fixed."""
    ratings: dict[str, float] = {REFERENCE_PLAYER: 1000.0}
    for r in rows:
        a, b = r["player_a"], r["player_b"]
        ra, rb = ratings.setdefault(a, 1000.0), ratings.setdefault(b, 1000.0)
        new_a, new_b = elo.update(ra, rb, r["score_a"], k)
        if a != REFERENCE_PLAYER:
            ratings[a] = new_a
        if b != REFERENCE_PLAYER:
            ratings[b] = new_b
    return ratings


@pytest.mark.parametrize(
    "garbage",
    [b"{not json", b"[]", b'{"players": {"x": {}}}', b'{"players": {"x": {"rating": "high"}}}', b"\xff\xfe\x00"],
    ids=["syntax", "list", "missing-rating", "bad-rating", "not-utf8"],
)
def test_corrupt_league_is_kept_aside_and_rebuilt_from_games(tmp_path: Path, garbage: bytes) -> None:
    rows = [
        _row("learner", "rule", 1.0, step=64),
        _row("learner", "main@64", 0.5, step=128),
        _row("main@64", "rule", 0.0, step=128),
        _row("learner", "main@64", 1.0, step=192),
        _row("rule", "learner", 1.0),
    ]
    append_games(tmp_path / "games.csv", rows)
    path = tmp_path / "league.json"
    path.write_bytes(garbage)

    league = League.load(path)
    bad = tmp_path / "league.json.bad"
    assert bad.read_bytes() == garbage  # the damaged file is kept, byte for byte
    assert league.recovery_note is not None
    assert "league.json.bad" in league.recovery_note and "5 games" in league.recovery_note
    expected = _replay(rows)  # elo.update game by game (the first two are checked by hand below)
    assert set(league.players) == set(expected)
    for name, rating in expected.items():
        assert league.players[name].rating == pytest.approx(rating, abs=1e-9), name
    assert league.players["rule"].rating == 1000.0
    assert league.players["learner"].games == 4 and league.players["main@64"].games == 3
    assert league.players["learner"].step == 64  # from its first row
    # the rebuilt league was saved as valid JSON and loads cleanly now
    reloaded = League.load(path)
    assert reloaded.recovery_note is None
    assert reloaded.players["learner"].rating == pytest.approx(expected["learner"])


def test_first_rows_replayed_by_hand(tmp_path: Path) -> None:
    rows = [_row("learner", "rule", 1.0), _row("learner", "main@64", 0.5)]
    append_games(tmp_path / "games.csv", rows)
    (tmp_path / "league.json").write_text("{")
    league = League.load(tmp_path / "league.json")
    # learner beats rule (1000 v 1000, K=32): learner 1016, rule stays 1000
    # learner (1016) draws main@64 (1000): E = 1/(1+10^(-16/400)) = 0.5230096
    #   delta = 32 * (0.5 - 0.5230096) = -0.7363068 -> learner 1015.2636932, main@64 1000.7363068
    assert league.players["learner"].rating == pytest.approx(1015.2636932, abs=1e-6)
    assert league.players["main@64"].rating == pytest.approx(1000.7363068, abs=1e-6)
    assert league.players["learner"].step is None  # no step in these rows


def test_corrupt_league_without_games_starts_over(tmp_path: Path) -> None:
    path = tmp_path / "league.json"
    path.write_text("not json at all")
    league = League.load(path)
    assert list(league.players) == [REFERENCE_PLAYER]
    assert "0 games" in (league.recovery_note or "")
    assert (tmp_path / "league.json.bad").read_text() == "not json at all"
    # a second corruption does not overwrite the first .bad
    path.write_text("also broken")
    League.load(path)
    assert (tmp_path / "league.json.bad").read_text() == "not json at all"
    extra = [p for p in tmp_path.iterdir() if p.name.startswith("league.json.bad-")]
    assert len(extra) == 1 and extra[0].read_text() == "also broken"


def test_append_games_writes_header_once(tmp_path: Path) -> None:
    path = tmp_path / "games.csv"
    append_games(path, [_row("a", "b", 1.0, step=5)])
    append_games(path, [_row("a", "b", 0.0), _row("b", "a", 0.5)])
    lines = path.read_text().splitlines()
    assert lines[0].split(",") == GAMES_FIELDS
    assert sum(line.startswith("time,") for line in lines) == 1
    with path.open(newline="") as f:
        got = list(csv.DictReader(f))
    assert [(r["player_a"], r["player_b"], float(r["score_a"])) for r in got] == [
        ("a", "b", 1.0), ("a", "b", 0.0), ("b", "a", 0.5)
    ]  # fmt: skip
    assert got[0]["step"] == "5" and got[1]["step"] == ""
    assert all(r["time"] for r in got)  # stamped


def test_append_games_refuses_a_foreign_header(tmp_path: Path) -> None:
    path = tmp_path / "games.csv"
    foreign = "date,home,away,result\n2024-01-01,x,y,1-0\n"
    path.write_text(foreign)
    with pytest.raises(LeagueError, match=r"games\.csv header") as err:
        append_games(path, [_row("a", "b", 1.0)])
    assert "left untouched" in str(err.value) and ".bad" in str(err.value)
    assert path.read_text() == foreign  # not a byte changed


def test_league_json_is_plain_json(tmp_path: Path) -> None:
    league = League(tmp_path / "league.json")
    league.record("a", "b", 1.0)
    league.save()
    data = json.loads((tmp_path / "league.json").read_text())
    assert data["reference"] == "rule"
    assert data["players"]["a"]["rating"] == 1016.0 and data["players"]["b"]["rating"] == 984.0
    assert data["k_factor"] == 32.0


def test_rebuild_restores_the_exact_ratings_written_with_each_game(tmp_path: Path) -> None:
    """Rows written by speedflip carry the ratings after each game: a rebuild matches exactly even with
    another K factor and a snapshot that started at the learner's rating (as in training)."""
    path = tmp_path / "league.json"
    league = League(path, k_factor=16.0)
    league.player(REFERENCE_PLAYER)
    league.player("learner").rating = 1040.0
    snapshot = league.player("main@64", step=64)
    snapshot.rating = 1040.0  # a new snapshot starts at the learner's rating
    rows = []
    for a, b, score in [("learner", "rule", 1.0), ("learner", "main@64", 0.0), ("learner", "main@64", 0.5)]:
        ra, rb = league.record(a, b, score)
        rows.append({"player_a": a, "player_b": b, "score_a": score, "step": 64, "rating_a": ra, "rating_b": rb})
    league.save()
    append_games(tmp_path / "games.csv", rows)
    expected = {name: p.rating for name, p in league.players.items()}
    path.write_text("{")
    rebuilt = League.load(path)
    assert {name: p.rating for name, p in rebuilt.players.items()} == expected
    assert rebuilt.players["main@64"].step == 64
