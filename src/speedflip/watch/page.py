"""Turn a :class:`Replay` into one self-contained HTML page (data, style and renderer inline).

The arrays are quantised (positions to 0.5 uu in int16, quaternions to int16, boost to uint8),
differenced over time (positions and rotations change a little from frame to frame, so the
differences compress well), gzip-compressed and embedded as base64. The page inflates them with
the browser's built-in ``DecompressionStream``; nothing is fetched from the network.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from speedflip._types import Array
from speedflip.watch.recorder import Replay
from speedflip.watch.viewer_assets import VIEWER_CSS, VIEWER_HTML, VIEWER_JS

POS_SCALE = 0.5  # uu per int16 step
QUAT_SCALE = 1.0 / 32767.0


def _int16(values: Array, scale: float) -> Array:
    q = np.round(np.asarray(values, np.float64) / scale)
    out: Array = np.clip(q, -32768, 32767).astype(np.int16)
    return out


def _delta(values: Array) -> Array:
    """Differences along time (axis 0), modulo 2^16, so the page restores them exactly with int16 sums."""
    wide = values.astype(np.int32)
    out = wide.copy()
    out[1:] = wide[1:] - wide[:-1]
    wrapped: Array = ((out + 32768) % 65536 - 32768).astype(np.int16)
    return wrapped


def encode_channels(replay: Replay) -> tuple[bytes, list[dict[str, Any]]]:
    """The replay as one little-endian byte blob plus the channel layout the page decodes."""
    T, C = replay.num_frames, int(replay.cars.shape[1])
    channels: list[tuple[str, Array, float, bool]] = [
        ("ball_pos", _int16(replay.ball[:, :3], POS_SCALE), POS_SCALE, True),
        ("ball_rot", _int16(replay.ball[:, 3:7], QUAT_SCALE), QUAT_SCALE, True),
        ("car_pos", _int16(replay.cars[:, :, :3], POS_SCALE), POS_SCALE, True),
        ("car_rot", _int16(replay.cars[:, :, 3:7], QUAT_SCALE), QUAT_SCALE, True),
        ("boost", np.clip(np.round(replay.boost), 0, 255).astype(np.uint8), 1.0, False),
        ("flags", replay.flags.astype(np.uint8), 1.0, False),
        ("pads", replay.pads.astype(np.uint8), 1.0, False),
        ("scores", np.clip(replay.scores, -32768, 32767).astype(np.int16), 1.0, False),
        ("cut", replay.cut.astype(np.uint8), 1.0, False),
        ("clock", replay.clock.astype(np.float32), 1.0, False),
    ]
    blob = bytearray()
    layout: list[dict[str, Any]] = []
    for name, values, scale, delta in channels:
        data = _delta(values) if delta else values
        while len(blob) % 4:  # typed-array views need aligned offsets
            blob.append(0)
        layout.append(
            {
                "name": name,
                "dtype": str(data.dtype),
                "shape": list(data.shape),
                "offset": len(blob),
                "scale": scale,
                "delta": delta,
            }
        )
        blob += np.ascontiguousarray(data).astype(data.dtype.newbyteorder("<"), copy=False).tobytes()
    assert layout[2]["shape"][:2] == [T, C]
    return bytes(blob), layout


def _script_json(data: dict[str, Any]) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(data, separators=(",", ":")).replace("</", "<\\/").replace("<!--", "<\\!--")


def build_page(replay: Replay, compress: bool = True, title: str | None = None) -> str:
    """The replay page as HTML text (self-contained: no external script, style or data URL)."""
    replay.check()
    blob, layout = encode_channels(replay)
    payload = gzip.compress(blob, compresslevel=9, mtime=0) if compress else blob
    meta = dict(replay.meta)
    meta["encoding"] = {"compression": "gzip" if compress else "raw", "channels": layout}
    page_title = title or f"{meta.get('blue_name', 'blue')} vs {meta.get('orange_name', 'orange')} - speedflip replay"
    values = {
        "TITLE": html.escape(page_title),
        "CSS": VIEWER_CSS,
        "META": _script_json(meta),
        "DATA": base64.b64encode(payload).decode("ascii"),
        "JS": VIEWER_JS,
    }
    out = re.sub(r"__(TITLE|CSS|META|DATA|JS)__", lambda m: values[m.group(1)], VIEWER_HTML)
    return out


def write_page(replay: Replay, path: str | Path, compress: bool = True) -> Path:
    """Write the page; returns its path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(build_page(replay, compress=compress), encoding="utf-8")
    return out
