"""Milestone ratings: the MAP performance rating by hand, fixed references, opponents, games.csv and its rebuild."""

from __future__ import annotations

import csv
import itertools
import json
import math
import re
import shutil
from pathlib import Path

import pytest
from sp_helpers import tiny_config

from speedflip.selfplay.league import FIXED_RATINGS, IDLE_PLAYER, IDLE_RATING, REFERENCE_PLAYER, League
from speedflip.selfplay.policies import find_checkpoint
from speedflip.selfplay.rating import MilestoneRating, earlier_milestones, performance_rating, rate_milestone

LOG3 = math.log10(3.0)


def test_no_games_is_the_prior_mean() -> None:
    assert performance_rating([], [], prior_mean=1234.0, prior_sd=200.0) == 1234.0


@pytest.mark.parametrize("prior_sd", [50.0, 300.0, 1e6])
def test_all_draws_against_1000_with_the_prior_at_1000(prior_sd: float) -> None:
    assert performance_rating([0.5] * 6, [1000.0] * 6, 1000.0, prior_sd) == pytest.approx(1000.0, abs=1e-6)


def test_flat_prior_is_the_elo_difference_of_the_score_rate() -> None:
    # 3 wins, 1 loss against 1000: E = 3/4 -> R = 1000 + 400 log10(3 / 1) = 1190.85
    assert performance_rating([1, 1, 1, 0], [1000.0] * 4, prior_sd=None) == pytest.approx(1000 + 400 * LOG3)
    # a score rate of 1/4 against 600: 600 - 400 log10(3)
    assert performance_rating([0, 0, 0.5, 0.5], [600.0] * 4, prior_sd=None) == pytest.approx(600 - 400 * LOG3)


def test_symmetric_cases() -> None:
    # a win against 900 and a loss against 1100 balance exactly at 1000 (flat prior): 1 - E(1000, 900) = E(1000, 1100)
    assert performance_rating([1.0, 0.0], [900.0, 1100.0], prior_sd=None) == pytest.approx(1000.0)
    # one win and one loss mirror each other about the prior mean
    win = performance_rating([1.0], [1000.0], 1000.0, 300.0)
    loss = performance_rating([0.0], [1000.0], 1000.0, 300.0)
    assert win > 1000.0 and win - 1000.0 == pytest.approx(1000.0 - loss)


def test_one_win_with_the_prior_by_hand() -> None:
    """At the maximum, slope * (1 - E) = (R - mu) / sd^2 (slope = ln 10 / 400). Choose sd so that the answer is
    R = 1000 + 400 log10(3), where E = 3/4: sd^2 = 4 (R - 1000) / slope = 640000 ln(3) / ln(10)^2."""
    sd = 800.0 * math.sqrt(math.log(3.0)) / math.log(10.0)
    assert performance_rating([1.0], [1000.0], 1000.0, sd) == pytest.approx(1000.0 + 400.0 * LOG3, abs=1e-6)


def test_monotonic_in_wins_and_pulled_by_the_prior() -> None:
    ratings = [performance_rating([1.0] * w + [0.0] * (8 - w), [1000.0] * 8, 1000.0, 300.0) for w in range(9)]
    assert all(a < b for a, b in itertools.pairwise(ratings)), ratings
    assert ratings[0] < 1000.0 < ratings[8] and math.isfinite(ratings[8])  # all wins stays finite
    # the tighter the prior, the closer to its mean
    tight = performance_rating([1.0] * 8, [1000.0] * 8, 1000.0, 50.0)
    assert 1000.0 < tight < ratings[8]


def test_far_from_the_start_converges() -> None:
    # prior far below the evidence: Newton's method with backtracking still lands on the stationary point
    rating = performance_rating([1.0, 1.0, 0.5, 0.0], [2500.0] * 4, prior_mean=0.0, prior_sd=1000.0)
    expected = 1.0 / (1.0 + 10.0 ** ((2500.0 - rating) / 400.0))
    gradient = math.log(10) / 400 * (2.5 - 4 * expected) - rating / 1000.0**2
    assert abs(gradient) < 1e-9


@pytest.mark.parametrize(
    ("scores", "ratings", "sd", "message"),
    [
        ([1.0, 1.0], [1000.0, 1000.0], None, "unbounded"),
        ([], [], None, "unbounded"),
        ([2.0], [1000.0], 300.0, "must lie in [0, 1]"),
        ([1.0], [1000.0, 900.0], 300.0, "one opponent rating per score"),
        ([1.0], [1000.0], 0.0, "prior_sd must be > 0"),
    ],
)
def test_bad_input_says_what_is_wrong(
    scores: list[float], ratings: list[float], sd: float | None, message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        performance_rating(scores, ratings, 1000.0, sd)


def test_fixed_references_never_move(tmp_path: Path) -> None:
    league = League(tmp_path / "league.json")
    assert league.player(IDLE_PLAYER).rating == IDLE_RATING < 1000.0 == league.player(REFERENCE_PLAYER).rating
    for score in (1.0, 0.0, 0.5):
        league.record("bot", IDLE_PLAYER, score)
        league.record(REFERENCE_PLAYER, IDLE_PLAYER, score)
    assert league.players[IDLE_PLAYER].rating == IDLE_RATING and league.players[REFERENCE_PLAYER].rating == 1000.0
    assert league.players[IDLE_PLAYER].games == 6
    # a performance rating moves only A, and never a reference
    assert league.record_rated("main@5", IDLE_PLAYER, 1111.0) == (1111.0, IDLE_RATING)
    with pytest.raises(ValueError, match="fixed reference"):
        league.record_rated(IDLE_PLAYER, "main@5", 900.0)
    # a league file that holds another rating for a reference (written before idle was fixed) loads the fixed one
    league.save()
    data = json.loads(league.path.read_text())
    assert data["fixed_ratings"] == FIXED_RATINGS
    data["players"][IDLE_PLAYER]["rating"] = 1234.0
    league.path.write_text(json.dumps(data))
    assert League.load(league.path).players[IDLE_PLAYER].rating == IDLE_RATING


def test_earlier_milestones_are_1_2_4_back_and_rated(tmp_path: Path) -> None:
    league = League(tmp_path / "league.json")
    for step in range(1, 9):  # milestones main@1 .. main@8, all rated but main@6
        player = league.player(f"main@{step}", step=step, path=str(tmp_path / "milestones" / "main" / str(step)))
        player.games = 0 if step == 6 else 4
    league.player("run@3", step=3, path=str(tmp_path / "checkpoints" / "3")).games = 4  # not a milestone
    picked = earlier_milestones(league, step=9, count=4)
    assert [p.name for p in picked] == ["main@8", "main@7", "main@4"]  # rated: 1 2 3 4 5 7 8; back 1, 2, 4; 8 > 7
    assert [p.name for p in earlier_milestones(league, step=9, count=2)] == ["main@8", "main@7"]
    assert earlier_milestones(league, step=1, count=2) == []
    assert earlier_milestones(league, step=9, count=0) == []


def test_rate_milestone_writes_exact_games(tmp_path: Path, run_1v1: Path) -> None:
    checkpoint = next((run_1v1 / "checkpoints").iterdir())
    step = int(checkpoint.name)
    path = tmp_path / "milestones" / "main" / checkpoint.name
    shutil.copytree(checkpoint, path)
    cfg = tiny_config(selfplay={"rating_games": 4, "rating_game_seconds": 3.0})
    league = League.load(tmp_path / "league.json")
    games_log = tmp_path / "games.csv"

    rated = rate_milestone(path, league, cfg.env, cfg.selfplay, seed=0, games_log=games_log, train_minutes=2.5)

    name = f"main@{step}"
    assert rated.name == name and rated.prior_mean == IDLE_RATING  # the first milestone: prior at the idle car
    assert rated.games == {REFERENCE_PLAYER: 4, IDLE_PLAYER: 4}
    assert rated.describe().startswith(f"{name}: ")
    with games_log.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 8
    assert {r["player_a"] for r in rows} == {name}
    assert [r["player_b"] for r in rows] == [REFERENCE_PLAYER, IDLE_PLAYER] * 4  # arena k plays opponent k mod 2
    assert [r["a_is_blue"] for r in rows] == ["True"] * 4 + ["False"] * 4  # each opponent: 2 games per side
    assert all(int(r["step"]) == step and float(r["seconds"]) == pytest.approx(3.0, abs=0.1) for r in rows)
    # each row holds the rating of the games so far; the references' own ratings stay fixed
    for j in range(1, 9):
        scores = [float(r["score_a"]) for r in rows[:j]]
        anchors = [FIXED_RATINGS[r["player_b"]] for r in rows[:j]]
        assert float(rows[j - 1]["rating_a"]) == pytest.approx(performance_rating(scores, anchors, IDLE_RATING, 300.0))
        assert float(rows[j - 1]["rating_b"]) == FIXED_RATINGS[rows[j - 1]["player_b"]]
    player = league.players[name]
    assert player.rating == rated.rating == pytest.approx(float(rows[-1]["rating_a"]))
    assert (player.games, player.step, player.path, player.train_minutes) == (8, step, str(path), 2.5)
    assert player.is_milestone
    assert league.players[REFERENCE_PLAYER].rating == 1000.0 and league.players[IDLE_PLAYER].rating == IDLE_RATING

    # a corrupt league.json is rebuilt from games.csv exactly, the milestone's folder restored beside it
    saved = League.load(league.path)
    league.path.write_text("{broken")
    rebuilt = League.load(league.path)
    assert rebuilt.recovery_note is not None and "8 games" in rebuilt.recovery_note
    for who in (name, REFERENCE_PLAYER, IDLE_PLAYER):
        a, b = saved.players[who], rebuilt.players[who]
        assert (a.rating, a.games, a.history) == (b.rating, b.games, b.history), who
    assert rebuilt.players[name].path == str(path) and rebuilt.players[name].step == step
    assert rebuilt.players[name].train_minutes is None  # the tiny checkpoint's meta holds no train_seconds


def test_the_anchor_score_counts_the_rule_bot_and_the_idle_car_only() -> None:
    rated = MilestoneRating("main@2", 828.0, 825.0, points={"rule": 4.0, "idle": 3.5, "main@1": 5.5},
                            games={"rule": 8, "idle": 8, "main@1": 8})  # fmt: skip
    assert rated.anchor_score() == pytest.approx(7.5 / 16)  # the games against main@1 do not count
    assert MilestoneRating("main@1", 700.0, 470.0, points={"idle": 2.0}, games={"idle": 4}).anchor_score() == 0.5
    assert MilestoneRating("m@1", 700.0, 470.0, points={"main@0": 1.0}, games={"main@0": 2}).anchor_score() is None


# 2 arenas x 2 cars (pure self-play) x 16 steps = 64 agent steps per iteration; a milestone after every one
STEPS = 64


def _train_rated(run: Path, total_steps: int, snapshot_every: int = STEPS) -> str:
    import io

    from rich.console import Console

    from speedflip.train.run import train

    cfg = tiny_config(
        ppo={"num_steps": 16, "minibatch_size": 64},
        run={"total_steps": total_steps, "checkpoint_interval_steps": 2 * STEPS, "milestone_replays": False},
        selfplay={"snapshot_interval_steps": snapshot_every, "rating_games": 2, "rating_game_seconds": 2.0},
    )
    assert cfg.selfplay.rate_milestones  # the default
    out = io.StringIO()
    code = train(cfg, run, console=Console(file=out, width=200))
    assert code == 0, out.getvalue()
    return " ".join(out.getvalue().split())


def _shipped(run: Path) -> tuple[str, float]:
    """The milestone ``selfplay.ship_by=anchor_score`` (the default) ships, computed from games.csv by hand:
    the best score rate against rule and idle, the higher rating-time Elo on a tie, the earlier on a full tie."""
    with (run / "games.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["player_a"].endswith(f"@{r['step']}")]
    best: tuple[float, float] | None = None
    name = ""
    for milestone in dict.fromkeys(r["player_a"] for r in rows):  # in rating order
        own = [r for r in rows if r["player_a"] == milestone]
        scores = [float(r["score_a"]) for r in own if r["player_b"] in ("rule", "idle")]
        key = (sum(scores) / len(scores), float(own[-1]["rating_a"]))
        if best is None or key > best:
            best, name = key, milestone
    assert best is not None
    return name, best[0]


def test_a_short_run_rates_every_milestone_and_leaves_its_plot(tmp_path: Path) -> None:
    from speedflip.cli import main

    run = tmp_path / "run"
    text = _train_rated(run, 4 * STEPS)
    assert "milestone rated in" in text and "milestone rating:" in text and "league.png" in text

    league = json.loads((run / "league.json").read_text())["players"]
    steps = [STEPS * i for i in range(1, 5)]
    milestones = {f"main@{s}": league[f"main@{s}"] for s in steps}
    assert {n for n in league if "@" in n} == set(milestones)
    for name, player in milestones.items():
        assert player["games"] > 0, name
        assert player["path"] == str(run / "milestones" / "main" / name.split("@")[1])
    minutes = [p["train_minutes"] for p in milestones.values()]
    assert all(m > 0 for m in minutes) and minutes == sorted(minutes)
    assert league["rule"]["rating"] == 1000.0 and league["idle"]["rating"] == IDLE_RATING
    assert league["learner"]["games"] == 0  # pure self-play: the learner's pool rating plays no game

    with (run / "games.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    opponents = {n: [r["player_b"] for r in rows if r["player_a"] == n] for n in milestones}
    assert opponents["main@64"] == ["rule", "idle"] * 2  # no earlier milestone yet
    assert sorted(set(opponents["main@128"])) == ["idle", "main@64", "rule"]
    assert sorted(set(opponents["main@256"])) == ["idle", "main@128", "main@192", "rule"]  # 1 and 2 back
    assert all(len(games) == 2 * len(set(games)) for games in opponents.values())  # rating_games each

    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["global_step"] for r in records] == steps
    for r in records:  # a milestone (and its rating) after every iteration
        assert r["perf/rating_seconds"] > 0
        assert r["selfplay/milestone_elo"] == pytest.approx(league[f"main@{r['global_step']}"]["rating"])
        assert 0 < r["perf/rating_share"] < 1
    meta = json.loads((run / "checkpoints" / str(4 * STEPS) / "meta.json").read_text())
    assert meta["train_seconds"] > meta["rating_seconds"] > 0

    # the shipped bot: the best against the anchors (no pool games here, so the ratings are the rating-time ones)
    top, anchor_score = _shipped(run)
    best = json.loads((run / "best.json").read_text())
    assert (best["name"], best["path"], best["stage"]) == (top, f"milestones/main/{top.split('@')[1]}", "main")
    assert best["elo"] == pytest.approx(milestones[top]["rating"])
    assert best["anchor_score"] == pytest.approx(anchor_score, abs=1e-4)
    assert f"shipped bot: the best-rated milestone {top}" in text
    assert find_checkpoint(str(run)) == run / best["path"]
    assert find_checkpoint(f"{run}@latest") == run / "checkpoints" / str(4 * STEPS)

    png = run / "league.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
    png.unlink()
    assert main(["league", str(run)]) == 0
    assert png.is_file()

    # resumed: the clocks go on from the checkpoint, the next milestone plays the ones before it
    _train_rated(run, 5 * STEPS)
    league = json.loads((run / "league.json").read_text())["players"]
    assert league["main@320"]["games"] > 0
    assert league["main@320"]["train_minutes"] > minutes[-1]
    resumed = json.loads((run / "checkpoints" / str(5 * STEPS) / "meta.json").read_text())
    assert resumed["train_seconds"] > meta["train_seconds"] and resumed["rating_seconds"] > meta["rating_seconds"]
    assert json.loads((run / "best.json").read_text())["name"] == _shipped(run)[0]  # the resumed run kept comparing


def test_a_run_stopped_by_a_signal_rates_its_final_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM after the third iteration of a run with milestones every 2: the checkpoint is saved, then
    the final policy (step 3) becomes a milestone too, is rated and competes for best.json."""
    import io
    import signal

    from rich.console import Console

    from speedflip.train import run as run_module

    between = run_module.RocketLeagueSession.between

    def between_then_signal(self: run_module.RocketLeagueSession, record: dict, console: Console) -> None:
        between(self, record, console)
        if self.global_step == 3 * STEPS:
            signal.raise_signal(signal.SIGTERM)  # what a scheduler sends; StopFlag turns it into a clean stop

    monkeypatch.setattr(run_module.RocketLeagueSession, "between", between_then_signal)
    run = tmp_path / "run"
    cfg = tiny_config(
        ppo={"num_steps": 16, "minibatch_size": 64},
        run={"total_steps": 10 * STEPS, "checkpoint_interval_steps": 10 * STEPS, "milestone_replays": False},
        selfplay={"snapshot_interval_steps": 2 * STEPS, "rating_games": 2, "rating_game_seconds": 2.0},
    )
    out = io.StringIO()
    assert run_module.train(cfg, run, console=Console(file=out, width=200)) == 0, out.getvalue()
    text = " ".join(out.getvalue().split())
    assert "Stopped (SIGTERM received) at 192 agent steps" in text
    assert "rating the final policy (192 agent steps) as a milestone" in text
    assert sorted(int(p.name) for p in (run / "milestones" / "main").iterdir()) == [2 * STEPS, 3 * STEPS]
    league = json.loads((run / "league.json").read_text())["players"]
    assert league[f"main@{3 * STEPS}"]["games"] == 2 * 3  # rule, idle and the milestone before it
    assert json.loads((run / "best.json").read_text())["name"] == _shipped(run)[0]
    assert "milestone rating:" in text  # the cost report comes after the final rating


def test_the_end_of_the_budget_makes_a_rated_milestone(tmp_path: Path) -> None:
    """Milestones every 2 iterations, a budget of 3: the last iteration makes one too, so the final policy
    is rated and can be the shipped bot."""
    run = tmp_path / "run"
    _train_rated(run, 3 * STEPS, snapshot_every=2 * STEPS)
    assert sorted(int(p.name) for p in (run / "milestones" / "main").iterdir()) == [2 * STEPS, 3 * STEPS]
    league = json.loads((run / "league.json").read_text())["players"]
    assert league[f"main@{2 * STEPS}"]["games"] > 0 and league[f"main@{3 * STEPS}"]["games"] > 0
    assert json.loads((run / "best.json").read_text())["name"] == _shipped(run)[0]
