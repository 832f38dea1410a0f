"""The replay page in a real browser (headless Chromium; skipped where it is not installed).

CI installs Debian's ``chromium`` package. The page must load without console output or errors,
honour ``#t=0.5`` (scrub to the middle) and draw the field: a screenshot with a good share of
field-green pixels and both team colours.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from watch_browser import find_chromium, run_chromium

from speedflip.watch.page import write_page
from speedflip.watch.run import watch_match

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    replay = watch_match("rule", "rule", team_size=2, seconds=20.0, seed=1)
    return write_page(replay, tmp_path_factory.mktemp("page") / "match.html")


def test_page_loads_without_errors_and_scrubs_to_the_middle(page: Path) -> None:
    assert CHROMIUM is not None
    run = run_chromium(CHROMIUM, page.as_uri() + "#t=0.5", "--dump-dom")
    assert run.console == [], f"the page wrote to the console: {run.console}"
    html = run.stdout
    status = re.search(r'data-replay-status="([^"]*)"', html)
    assert status is not None and status[1] == "ready", re.search(r'data-replay-errors="([^"]*)"', html)
    frames = int(re.search(r'data-replay-frames="(\d+)"', html)[1])  # type: ignore[index]
    frame = int(re.search(r'data-replay-frame="(\d+)"', html)[1])  # type: ignore[index]
    assert abs(frame - (frames - 1) / 2) <= 1.5, (frame, frames)


def test_screenshot_shows_the_field(page: Path, tmp_path: Path) -> None:
    from PIL import Image

    assert CHROMIUM is not None
    shot = tmp_path / "shot.png"
    run = run_chromium(CHROMIUM, page.as_uri() + "#t=0.5&cam=orbit", f"--screenshot={shot}", "--window-size=1280,720")
    assert shot.is_file(), run.console
    pixels = np.asarray(Image.open(shot).convert("RGB")).astype(np.int32)
    assert pixels.shape[:2] == (720, 1280)
    r, g, b = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    green = (g > r + 25) & (g > b + 10) & (g > 60)
    blue = (b > r + 80) & (b > g + 40)
    orange = (r > 180) & (g > 70) & (g < 170) & (b < 90)
    assert green.mean() > 0.15, f"only {green.mean():.1%} of the pixels are field green"
    assert blue.sum() > 200 and orange.sum() > 200, (int(blue.sum()), int(orange.sum()))
