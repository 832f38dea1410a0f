"""jsonsafe: numpy values, NaN and odd objects always serialise."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from speedflip.jsonsafe import dumps, to_jsonable


def test_numpy_scalars_become_python_values() -> None:
    out = to_jsonable({"f": np.float32(1.5), "i": np.int64(3), "b": np.bool_(True), "u": np.uint8(7)})
    assert out == {"f": 1.5, "i": 3, "b": True, "u": 7}
    assert type(out["f"]) is float and type(out["i"]) is int and type(out["b"]) is bool


def test_arrays_and_tuples_become_lists() -> None:
    assert to_jsonable(np.array([[1, 2], [3, 4]], np.int32)) == [[1, 2], [3, 4]]
    assert to_jsonable((1, np.float64(2.5))) == [1, 2.5]
    assert to_jsonable(np.zeros((0,))) == []


def test_nan_and_inf_become_null_everywhere() -> None:
    value = {
        "nan": float("nan"),
        "np_nan": np.float32("nan"),
        "inf": float("inf"),
        "neg_inf": -np.inf,
        "array": np.array([1.0, np.nan, np.inf]),
        "nested": [{"x": math.nan}],
    }
    text = dumps(value)
    assert json.loads(text) == {
        "nan": None,
        "np_nan": None,
        "inf": None,
        "neg_inf": None,
        "array": [1.0, None, None],
        "nested": [{"x": None}],
    }
    assert "NaN" not in text and "Infinity" not in text


def test_keys_paths_and_unknown_objects() -> None:
    class Odd:
        def __repr__(self) -> str:
            return "<odd>"

    out = to_jsonable({1: Path("/tmp/x"), "o": Odd(), "n": None, "s": "é"})
    assert out == {"1": "/tmp/x", "o": "<odd>", "n": None, "s": "é"}
    text = dumps(out)
    assert text.isascii()  # ensure_ascii: safe to write under any locale
    assert json.loads(text)["s"] == "é"


def test_dumps_indent() -> None:
    assert dumps({"a": 1}, indent=2) == '{\n  "a": 1\n}'
