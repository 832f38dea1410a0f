"""Training with the opponent pool end to end: milestones, league, games log, eval metrics, empty pool."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from sp_helpers import tiny_config

from speedflip.checkpoint import verify_checkpoint
from speedflip.config import Config
from speedflip.train.run import train

# 4 arenas, 1v1, opponent_share 0.5 -> round(0.5 * 4) = 2 pool arenas where the learner drives 1 car,
# 2 self-play arenas where it drives 2: 6 learner agents x 16 steps = 96 agent steps per iteration.
STEPS_PER_ITERATION = 6 * 16
TOTAL = 6 * STEPS_PER_ITERATION  # 576
EVERY = 2 * STEPS_PER_ITERATION  # 192: milestones and evals after iterations 2, 4, 6


def _cfg(**selfplay: Any) -> Config:
    return tiny_config(
        # episodes of at most 2 s (30 decisions) so pool games finish inside 96 decisions per arena
        env={"num_arenas": 4, "timeout_seconds": 2.0, "no_touch_timeout_seconds": 2.0},
        ppo={"num_steps": 16, "minibatch_size": 64},
        run={"total_steps": TOTAL, "checkpoint_interval_steps": 10**6},
        selfplay={
            "opponent_share": 0.5, "snapshot_interval_steps": EVERY, "eval_interval_steps": EVERY,
            "eval_games": 2, "eval_game_seconds": 5.0, "rate_milestones": False, **selfplay,
        },
    )  # fmt: skip


def _train(cfg: Config, run: Path) -> str:
    out = io.StringIO()
    code = train(cfg, run, console=Console(file=out, width=200))
    text = out.getvalue()
    assert code == 0, text
    return text


def _metrics(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _games(run: Path) -> list[dict[str, str]]:
    with (run / "games.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def test_training_with_the_pool(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _train(_cfg(), run)

    # milestones every 192 steps, full verified checkpoints
    steps = [EVERY, 2 * EVERY, 3 * EVERY]
    main = run / "milestones" / "main"
    assert sorted(int(p.name) for p in main.iterdir() if p.name.isdigit()) == steps
    for step in steps:
        meta = verify_checkpoint(main / str(step))
        assert (main / str(step) / "meta.json").is_file()
        assert meta["global_step"] == step and meta["phase"] == "main"

    league = json.loads((run / "league.json").read_text())
    names = set(league["players"])
    assert {"learner", "rule", *(f"main@{s}" for s in steps)} <= names
    assert league["players"]["rule"]["rating"] == 1000.0
    assert league["k_factor"] == 16.0  # selfplay.k_factor default
    assert league["players"]["main@192"]["step"] == 192
    assert league["players"]["main@192"]["path"] == str(main / "192")

    records = _metrics(run)
    assert [r["global_step"] for r in records] == [STEPS_PER_ITERATION * i for i in range(1, 7)]
    for r in records:
        assert isinstance(r["selfplay/learner_elo"], float)
        evaluated = r["global_step"] % EVERY == 0
        assert ("selfplay/winrate_vs_rule" in r) == evaluated, r["global_step"]
        if evaluated:
            assert r["selfplay/winrate_vs_rule"] in (0.0, 0.5, 1.0)  # 2 games
            assert 0.0 <= r["selfplay/score_rate_vs_rule"] <= 1.0
    assert records[-1]["selfplay/learner_elo"] == league["players"]["learner"]["rating"]

    games = _games(run)
    assert all(g["player_a"] == "learner" for g in games)
    evals = [g for g in games if g["touches_a"]]  # evaluation games record their match statistics
    pool = [g for g in games if not g["touches_a"]]
    assert {g["seconds"] for g in evals} == {"5.0"}  # selfplay.eval_game_seconds
    # a pool game's length: its decisions (8 ticks each) until a goal or the 2 s timeouts (30 decisions)
    assert all(0 < round(float(g["seconds"]) * 120 / 8, 3) <= 30 for g in pool)
    assert all(round(float(g["seconds"]) * 120 / 8, 3).is_integer() for g in pool)
    assert [int(g["step"]) for g in evals] == [192, 192, 384, 384, 576, 576]
    assert {g["player_b"] for g in evals} == {"rule"}
    assert [g["a_is_blue"] for g in evals[:2]] == ["True", "False"]
    # pool arenas end an episode every <= 30 decisions: at least 96 // 30 = 3 games in each of the 2 arenas
    assert len(pool) >= 6
    assert {g["player_b"] for g in pool} <= {"rule", "main@192", "main@384"}
    assert "rule" in {g["player_b"] for g in pool}  # the only member before the first milestone
    assert {g["a_is_blue"] for g in pool} == {"True", "False"}  # arena 0 blue, arena 1 orange
    assert league["players"]["learner"]["games"] == len(games)


def test_empty_pool_falls_back_to_self_play(tmp_path: Path) -> None:
    run = tmp_path / "run"
    text = _train(_cfg(include_rule=False, eval_interval_steps=0), run)
    assert "the opponent pool is empty" in " ".join(text.split())
    records = _metrics(run)
    assert records[-1]["global_step"] == TOTAL  # it trained all the way
    assert not any("selfplay/winrate_vs_rule" in r for r in records)  # eval switched off
    # pool size over time: 0 until the first milestone at 192, then the milestones join
    pool_sizes = [r["selfplay/pool_size"] for r in records]
    assert pool_sizes[0] == 0.0 and pool_sizes[1] == 0.0
    assert pool_sizes[2] >= 1.0
    league = json.loads((run / "league.json").read_text())
    assert "rule" not in {g["player_b"] for g in _games(run)}
    # games are rated only once a snapshot exists: every opponent is a milestone
    games = _games(run)
    assert games, "no pool game after the first milestone"
    assert {g["player_b"] for g in games} <= {"main@192", "main@384"}
    assert all(int(g["step"]) >= 192 for g in games)
    assert league["players"]["learner"]["games"] == len(games)


def test_training_with_the_idle_car_as_the_only_pool_opponent(tmp_path: Path) -> None:
    """selfplay.idle_share=1 (rule_share 0): every pool game is against the idle car, rated against its
    fixed rating, and the start-up summary says so."""
    run = tmp_path / "run"
    text = _train(_cfg(rule_share=0.0, idle_share=1.0, eval_interval_steps=0), run)
    assert "a pool in 50 % of arenas: idle car 100 %; self-play in the others" in " ".join(text.split())
    pool = _games(run)
    assert len(pool) >= 6  # as above: at least 3 games in each of the 2 pool arenas
    assert {g["player_b"] for g in pool} == {"idle"}
    assert {g["a_is_blue"] for g in pool} == {"True", "False"}
    league = json.loads((run / "league.json").read_text())
    assert league["players"]["idle"]["rating"] == 470.0  # a fixed reference: its games never move it
    assert league["players"]["idle"]["games"] == len(pool)
