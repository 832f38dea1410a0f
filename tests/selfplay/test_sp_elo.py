"""Elo ratings and the Wilson interval, against values worked out by hand."""

from __future__ import annotations

import pytest

from speedflip.selfplay import elo


def test_expected_score_by_hand() -> None:
    # 1000 vs 1200: 1 / (1 + 10^(200/400)) = 1 / (1 + 3.16227766) = 0.24025307
    assert elo.expected_score(1000.0, 1200.0) == pytest.approx(0.24025307, abs=1e-8)
    # and the stronger side gets the rest: 1 - 0.24025307 = 0.75974693
    assert elo.expected_score(1200.0, 1000.0) == pytest.approx(0.75974693, abs=1e-8)
    # equal ratings: 1 / (1 + 10^0) = 0.5
    assert elo.expected_score(1234.0, 1234.0) == 0.5
    # 400 points apart: 1 / (1 + 10) = 0.0909...
    assert elo.expected_score(1000.0, 1400.0) == pytest.approx(1.0 / 11.0)


def test_update_win_and_loss_by_hand() -> None:
    # win of the 1000 player against 1200, K=32: delta = 32 * (1 - 0.24025307) = 24.3119018
    a, b = elo.update(1000.0, 1200.0, 1.0, k=32.0)
    assert a == pytest.approx(1024.3119018, abs=1e-6)
    assert b == pytest.approx(1175.6880982, abs=1e-6)
    # loss: delta = 32 * (0 - 0.24025307) = -7.6880982
    a, b = elo.update(1000.0, 1200.0, 0.0, k=32.0)
    assert a == pytest.approx(992.3119018, abs=1e-6)
    assert b == pytest.approx(1207.6880982, abs=1e-6)
    # draw: delta = 32 * (0.5 - 0.24025307) = 8.3119018 (the weaker side gains)
    a, b = elo.update(1000.0, 1200.0, 0.5, k=32.0)
    assert a == pytest.approx(1008.3119018, abs=1e-6)
    # K scales the move: K=16 halves the win delta -> 12.1559509
    a, _ = elo.update(1000.0, 1200.0, 1.0, k=16.0)
    assert a == pytest.approx(1012.1559509, abs=1e-6)
    # the default K is 32
    assert elo.update(1000.0, 1200.0, 1.0) == elo.update(1000.0, 1200.0, 1.0, k=32.0)


@pytest.mark.parametrize("ra, rb", [(1000.0, 1200.0), (1500.0, 900.0), (1000.0, 1000.0), (812.5, 1333.25)])
@pytest.mark.parametrize("score", [0.0, 0.5, 1.0])
def test_update_is_zero_sum_and_symmetric(ra: float, rb: float, score: float) -> None:
    a, b = elo.update(ra, rb, score)
    assert (a - ra) == pytest.approx(-(b - rb))  # what A wins, B loses
    # the same game seen from B's side gives the same ratings
    b2, a2 = elo.update(rb, ra, 1.0 - score)
    assert a2 == pytest.approx(a) and b2 == pytest.approx(b)


def test_draw_between_equals_changes_nothing() -> None:
    # expected = 0.5 and score = 0.5: delta = 32 * 0 = 0
    assert elo.update(1337.0, 1337.0, 0.5) == (1337.0, 1337.0)


def test_update_many_applies_games_in_order() -> None:
    # win then loss from 1000/1000, K=32:
    #   win:  delta = 32 * (1 - 0.5) = 16 -> 1016 / 984
    #   loss: expected(1016, 984) = 1 / (1 + 10^(-32/400)) = 1 / (1 + 0.8317638) = 0.5459219
    #         delta = 32 * (0 - 0.5459216) = -17.469491 -> 998.530498 / 1001.469502
    a, b = elo.update_many(1000.0, 1000.0, [1.0, 0.0])
    assert a == pytest.approx(998.530498, abs=1e-5)
    assert b == pytest.approx(1001.469502, abs=1e-5)
    # loss then win ends the other way round (order matters: the later game weighs on new ratings)
    a2, b2 = elo.update_many(1000.0, 1000.0, [0.0, 1.0])
    assert a2 == pytest.approx(1001.469502, abs=1e-5)
    assert b2 == pytest.approx(998.530498, abs=1e-5)
    # and it is exactly update() applied game by game
    step = elo.update(*elo.update(1000.0, 1000.0, 1.0), 0.0)
    assert (a, b) == step
    assert elo.update_many(1100.0, 900.0, []) == (1100.0, 900.0)


def test_score_from_goals() -> None:
    assert elo.score_from_goals(3, 1) == 1.0
    assert elo.score_from_goals(1, 3) == 0.0
    assert elo.score_from_goals(2, 2) == 0.5
    assert elo.score_from_goals(0, 0) == 0.5
    assert elo.score_from_goals(1, 0) == 1.0


def test_wilson_interval_by_hand() -> None:
    # 8 wins of 10, z = 1.96: p = 0.8, z^2 = 3.8416, denom = 1 + 3.8416/10 = 1.38416
    # centre = (0.8 + 3.8416/20) / 1.38416 = 0.99208 / 1.38416 = 0.7167380
    # half = 1.96 * sqrt(0.8*0.2/10 + 3.8416/400) / 1.38416 = 1.96 * sqrt(0.025604) / 1.38416 = 0.2265810
    low, high = elo.win_rate_interval(8, 10)
    assert low == pytest.approx(0.7167380 - 0.2265810, abs=1e-6)  # 0.4901570
    assert high == pytest.approx(0.7167380 + 0.2265810, abs=1e-6)  # 0.9433190
    # draws count as half a win: 7.5 of 10 -> p = 0.75, centre = (0.75 + 0.19208) / 1.38416 = 0.6806150
    # half = 1.96 * sqrt(0.75*0.25/10 + 0.009604) / 1.38416 = 1.96 * sqrt(0.028354) / 1.38416 = 0.2384388
    low, high = elo.win_rate_interval(7.5, 10)
    assert low == pytest.approx(0.6806150 - 0.2384388, abs=1e-6)
    assert high == pytest.approx(0.6806150 + 0.2384388, abs=1e-6)


def test_wilson_interval_edges() -> None:
    assert elo.win_rate_interval(0, 0) == (0.0, 1.0)  # no games: nothing known
    low, high = elo.win_rate_interval(10, 10)
    assert high == pytest.approx(1.0) and high <= 1.0 and 0.6 < low < 1.0
    low, high = elo.win_rate_interval(0, 10)
    assert low == pytest.approx(0.0) and low >= 0.0 and 0.0 < high < 0.4
    # more games, same rate: a narrower interval
    l1, h1 = elo.win_rate_interval(8, 10)
    l2, h2 = elo.win_rate_interval(80, 100)
    assert h2 - l2 < h1 - l1


@pytest.mark.parametrize("score", [-0.1, 1.5, 2.0, float("nan")])
def test_invalid_score_raises(score: float) -> None:
    with pytest.raises(ValueError, match="score_a"):
        elo.update(1000.0, 1000.0, score)
    with pytest.raises(ValueError):
        elo.update_many(1000.0, 1000.0, [1.0, score])
