"""Opponent pool: sampling weights of every strategy and pruning, on hand-built ratings."""

from __future__ import annotations

import math

import numpy as np
import pytest

from speedflip.selfplay.pool import STRATEGIES, Member, prune, sampling_weights, with_fixed_shares


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_weights_are_probabilities(strategy: str) -> None:
    w = sampling_weights(strategy, [900.0, 1000.0, 1100.0, 1700.0], [10, 20, 30, 40], 1000.0)
    assert w.shape == (4,)
    assert np.all(w >= 0.0)
    assert w.sum() == pytest.approx(1.0)
    assert sampling_weights(strategy, [], [], 1000.0).shape == (0,)


def test_uniform_is_equal_whatever_the_ratings() -> None:
    w = sampling_weights("uniform", [500.0, 1000.0, 1500.0, 3000.0], [1, 2, 3, 4], 1000.0)
    np.testing.assert_allclose(w, [0.25, 0.25, 0.25, 0.25])


def test_elo_weighted_by_hand() -> None:
    # learner 1000, T = 100, window 400; gaps 0, 100, 300, 500
    # w = exp(-0), exp(-1), exp(-3), 0 (500 > window) = 1, 0.3678794, 0.0497871, 0
    # sum = 1.4176665 -> p = 0.7053845, 0.2594959, 0.0351190, 0
    w = sampling_weights("elo_weighted", [1000.0, 1100.0, 1300.0, 1500.0], [1, 2, 3, 4], 1000.0, 100.0, 400.0)
    np.testing.assert_allclose(w, [0.7053845, 0.2594959, 0.0351190, 0.0], atol=1e-6)
    assert w[3] == 0.0  # outside the window: never drawn
    assert int(np.argmax(w)) == 0  # the closest rating is the favourite
    # distance counts both ways: 900 and 1100 are equally likely
    w = sampling_weights("elo_weighted", [900.0, 1100.0], [1, 2], 1000.0)
    np.testing.assert_allclose(w, [0.5, 0.5])


def test_elo_weighted_falls_back_when_nobody_is_in_the_window() -> None:
    # gaps 500, 600 both outside: weights exp(-5), exp(-6) -> p = 1/(1+e^-1) = 0.7310586, 0.2689414
    w = sampling_weights("elo_weighted", [1500.0, 1600.0], [1, 2], 1000.0, 100.0, 400.0)
    np.testing.assert_allclose(w, [0.7310586, 0.2689414], atol=1e-6)


def test_recent_weighted_by_hand() -> None:
    # steps 100, 300, 200 -> age ranks (0 = newest) 2, 0, 1; T = 100 -> exp(-rank / 1)
    # w = e^-2, 1, e^-1 = 0.1353353, 1, 0.3678794; sum = 1.5032147 -> p = 0.0900306, 0.6652410, 0.2447284
    w = sampling_weights("recent_weighted", [1000.0, 1000.0, 1000.0], [100, 300, 200], 1000.0, temperature=100.0)
    np.testing.assert_allclose(w, [0.0900306, 0.6652410, 0.2447284], atol=1e-6)
    assert int(np.argmax(w)) == 1  # the newest snapshot
    # a hotter temperature (200 -> exp(-rank / 2)) flattens it: e^-1, 1, e^-0.5 / sum
    w = sampling_weights("recent_weighted", [1000.0] * 3, [100, 300, 200], 1000.0, temperature=200.0)
    raw = np.array([math.exp(-1.0), 1.0, math.exp(-0.5)])
    np.testing.assert_allclose(w, raw / raw.sum(), atol=1e-9)
    # ratings do not matter to this strategy
    w2 = sampling_weights("recent_weighted", [100.0, 2000.0, 900.0], [100, 300, 200], 1000.0, temperature=200.0)
    np.testing.assert_allclose(w, w2)


def test_difficulty_adjusted_by_hand() -> None:
    # target win rate 0.6, T = 100 -> scale T/400 = 0.25; learner 1000.
    # member at 1000 + 400*log10(0.4/0.6) = 929.5635: expected = 1/(1 + 0.4/0.6) = 0.6 exactly -> weight 1
    # member at 1000: expected 0.5, |0.5 - 0.6| = 0.1 -> exp(-0.4) = 0.6703200
    # member at 800: expected 1/(1+10^-0.5) = 0.7597469, gap 0.1597469 -> exp(-0.6389877) = 0.5278265
    # member at 1200: expected 0.2402531, gap 0.3597469 -> exp(-1.4389877) = 0.2371677
    # sum = 2.4353142 -> p = 0.4106246, 0.2752499, 0.2167386, 0.0973869
    just_right = 1000.0 + 400.0 * math.log10(0.4 / 0.6)
    w = sampling_weights(
        "difficulty_adjusted", [just_right, 1000.0, 800.0, 1200.0], [1, 2, 3, 4], 1000.0,
        temperature=100.0, target_win_rate=0.6,
    )  # fmt: skip
    np.testing.assert_allclose(w, [0.4106246, 0.2752499, 0.2167386, 0.0973869], atol=1e-6)
    assert int(np.argmax(w)) == 0
    # aiming at 0.5 makes the equal-rated member the favourite instead
    w = sampling_weights("difficulty_adjusted", [just_right, 1000.0, 800.0], [1, 2, 3], 1000.0, target_win_rate=0.5)
    assert int(np.argmax(w)) == 1


def test_unknown_strategy_raises() -> None:
    with pytest.raises(ValueError, match="unknown sampling strategy 'closest'"):
        sampling_weights("closest", [1000.0], [1], 1000.0)


def _names(members: list[Member]) -> list[str]:
    return [m.name for m in members]


def test_prune_drops_weak_snapshots_keeps_rule_and_newest() -> None:
    members = [
        Member("rule", None, 0, 500.0),  # far below the learner but the fixed reference: kept
        Member("s100", "m/100", 100, 900.0),  # 1500 - 400 = 1100 > 900: dropped
        Member("s200", "m/200", 200, 1150.0),
        Member("s300", "m/300", 300, 1250.0),
        Member("s400", "m/400", 400, 1300.0),
        Member("s500", "m/500", 500, 1400.0),
    ]
    kept = prune(members, learner_elo=1500.0, min_elo_diff=400.0, pool_size=3)
    # s200..s500 survive the Elo cut; pool_size 3 keeps the newest three (s200 is the oldest)
    assert _names(kept) == ["rule", "s300", "s400", "s500"]

    # with a big pool only the Elo cut applies; a snapshot exactly at learner - min_elo_diff stays
    members.append(Member("s150", "m/150", 150, 1100.0))
    kept = prune(members, learner_elo=1500.0, min_elo_diff=400.0, pool_size=100)
    assert _names(kept) == ["rule", "s150", "s200", "s300", "s400", "s500"]  # rule first, then by step

    # pool_size counts snapshots only, never the rule bot
    kept = prune(members, learner_elo=1000.0, min_elo_diff=400.0, pool_size=1)
    assert _names(kept) == ["rule", "s500"]


def test_a_fixed_share_holds_the_rule_bot_and_scales_the_snapshots_by_hand() -> None:
    # elo_weighted gives the rule bot (gap 300) exp(-3) against exp(0) and exp(-1) for two snapshots:
    # p = 0.0351190, 0.7053845, 0.2594959 (the hand computation above, reordered)
    probs = sampling_weights("elo_weighted", [1300.0, 1000.0, 1100.0], [0, 10, 20], 1000.0)
    np.testing.assert_allclose(probs, [0.0351190, 0.7053845, 0.2594959], atol=1e-6)
    # rule_share 0.3: the rule bot 0.3; the snapshots share 0.7 as 0.7053845 : 0.2594959
    # = 0.7 * 0.7310586 = 0.5117410 and 0.7 * 0.2689414 = 0.1882590
    out = with_fixed_shares(probs, [0.3, None, None])
    np.testing.assert_allclose(out, [0.3, 0.5117410, 0.1882590], atol=1e-6)
    assert out.sum() == pytest.approx(1.0)


def test_two_fixed_shares_the_rule_bot_and_the_idle_car_by_hand() -> None:
    # rule 0.6 and idle 0.25 fixed; the two snapshots (weights 0.3 : 0.1 of what is left) share 0.15
    # as 0.75 : 0.25 = 0.1125 and 0.0375; the rule bot's own weight (0.6 in probs) is ignored
    probs = np.array([0.6, 0.0, 0.3, 0.1])
    out = with_fixed_shares(probs, [0.6, 0.25, None, None])
    np.testing.assert_allclose(out, [0.6, 0.25, 0.1125, 0.0375])
    # only fixed members (no snapshot yet): their shares normalised, 0.8 and 0.2 -> 0.8 / 0.2; 0.3 and 0.1
    # -> 0.75 / 0.25
    np.testing.assert_allclose(with_fixed_shares(np.array([0.5, 0.5]), [0.8, 0.2]), [0.8, 0.2])
    np.testing.assert_allclose(with_fixed_shares(np.array([0.9, 0.1]), [0.3, 0.1]), [0.75, 0.25])
    # the rule bot free (rule_share unset) and idle fixed at 0.2: rule 0.25 and snapshot 0.75 of the 0.8 left
    np.testing.assert_allclose(with_fixed_shares(np.array([0.25, 0.0, 0.75]), [None, 0.2, None]), [0.2, 0.2, 0.6])


def test_no_fixed_share_or_only_the_rule_bot_changes_nothing() -> None:
    probs = np.array([0.2, 0.8])
    np.testing.assert_array_equal(with_fixed_shares(probs, [None, None]), probs)  # rule_share unset
    np.testing.assert_array_equal(with_fixed_shares(np.array([1.0]), [0.5]), [1.0])  # only the rule bot


def test_a_fixed_share_with_snapshots_weighted_zero_splits_the_rest_evenly() -> None:
    out = with_fixed_shares(np.array([1.0, 0.0, 0.0]), [0.5, None, None])
    np.testing.assert_allclose(out, [0.5, 0.25, 0.25])
