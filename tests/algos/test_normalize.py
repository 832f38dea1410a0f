"""RunningMeanStd against numpy; ReturnNormalizer against a hand-worked sequence."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import load_file, save_file

from speedflip.algos.normalize import ReturnNormalizer, RunningMeanStd
from speedflip.checkpoint import from_numpy_dict, to_numpy_dict


def test_running_mean_std_matches_numpy_over_concatenated_batches() -> None:
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 3)) * [1.0, 10.0, 0.1] for n in (5, 7, 1, 40)]
    rms = RunningMeanStd((3,))
    for b in batches:
        rms.update(b)
    data = np.concatenate(batches)
    # the prior (mean 0, var 1, count 1e-4) shifts the result by ~1e-4 relative at most
    np.testing.assert_allclose(rms.mean, data.mean(axis=0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(rms.var, data.var(axis=0), rtol=1e-4, atol=1e-4)
    assert rms.count == pytest.approx(53 + 1e-4)


def test_running_mean_std_hand_values() -> None:
    rms = RunningMeanStd(())
    rms.update(np.array([1.0, 3.0]))
    rms.update(np.array([5.0, 7.0, 9.0]))
    # all five values: mean 5, population variance (16+4+0+4+16)/5 = 8
    assert rms.mean == pytest.approx(5.0, rel=1e-4)
    assert rms.var == pytest.approx(8.0, rel=1e-4)


def test_normalize_clips_and_returns_float32() -> None:
    rms = RunningMeanStd((2,))
    rms.load_state_dict({"mean": np.array([1.0, -1.0]), "var": np.array([4.0, 0.25]), "count": np.array(10.0)})
    out = rms.normalize(np.array([[3.0, -1.5], [1001.0, 100.0]]), clip=5.0)
    assert out.dtype == np.float32
    # (3-1)/2 = 1; (-1.5+1)/0.5 = -1; second row clipped to +5 both
    np.testing.assert_allclose(out, [[1.0, -1.0], [5.0, 5.0]], atol=1e-5)


def test_state_dict_round_trip_is_a_copy() -> None:
    a = RunningMeanStd((2,))
    a.update(np.array([[1.0, 2.0], [3.0, 5.0]]))
    state = a.state_dict()
    b = RunningMeanStd((2,))
    b.load_state_dict(state)
    np.testing.assert_array_equal(b.mean, a.mean)
    np.testing.assert_array_equal(b.var, a.var)
    assert b.count == a.count
    a.update(np.array([[100.0, 100.0]]))
    assert not np.array_equal(b.mean, a.mean)  # b did not share a's arrays


def test_return_normalizer_hand_sequence() -> None:
    norm = ReturnNormalizer(num_agents=2, gamma=0.5)

    # step 1: returns = 0*0.5 + [1, 2] = [1, 2]; seen {1, 2}: var 0.25 -> scale by 1/0.5
    out = norm(np.array([1.0, 2.0]), np.array([False, True]))
    np.testing.assert_allclose(out, [2.0, 4.0], rtol=1e-3)
    assert out.dtype == np.float32
    # agent 1 was done: its running return restarts
    np.testing.assert_allclose(norm.returns, [1.0, 0.0])

    # step 2: returns = [1*0.5 + 1, 0*0.5 + 1] = [1.5, 1]; seen {1, 2, 1.5, 1}: mean 1.375,
    # var (0.140625 + 0.390625 + 0.015625 + 0.140625) / 4 = 0.171875 -> scale 1/sqrt(0.171875) = 2.41209
    out = norm(np.array([1.0, 1.0]), np.array([False, False]))
    np.testing.assert_allclose(out, [2.41209, 2.41209], rtol=1e-3)
    np.testing.assert_allclose(norm.returns, [1.5, 1.0])

    # step 3: returns = [0.75 + 0, 0.5 + 2] = [0.75, 2.5]; seen {1, 2, 1.5, 1, 0.75, 2.5}:
    # mean 8.75/6 = 1.458333, E[x^2] = 15.0625/6 = 2.510417, var = 2.510417 - 2.126736 = 0.383681
    # -> [0, 2 / sqrt(0.383681)] = [0, 3.22883]
    out = norm(np.array([0.0, 2.0]), np.array([True, False]))
    np.testing.assert_allclose(out, [0.0, 3.22883], rtol=1e-3)
    np.testing.assert_allclose(norm.returns, [0.0, 2.5])

    # step 4: agent 0 restarted from 0: [0*0.5 + 1, 2.5*0.5 + 0] = [1, 1.25]
    norm(np.array([1.0, 0.0]), np.array([False, False]))
    np.testing.assert_allclose(norm.returns, [1.0, 1.25])


def test_state_survives_the_checkpoint_tensor_round_trip_without_warnings(tmp_path: Path) -> None:
    # Checkpoints store the state as safetensors (count comes back with shape [1], not a scalar).
    a = RunningMeanStd((3,))
    a.update(np.arange(12, dtype=np.float64).reshape(4, 3))
    save_file(from_numpy_dict(a.state_dict(), "obs_rms."), str(tmp_path / "state.safetensors"))
    b = RunningMeanStd((3,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "conversion of an array with ndim > 0 to a scalar"
        b.load_state_dict(to_numpy_dict(load_file(str(tmp_path / "state.safetensors")), "obs_rms."))
    assert b.count == a.count == pytest.approx(4 + 1e-4)
    np.testing.assert_array_equal(b.mean, a.mean)
    np.testing.assert_array_equal(b.var, a.var)
