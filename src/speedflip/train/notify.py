"""Optional Discord webhook: milestone summaries posted to ``SPEEDFLIP_DISCORD_WEBHOOK``.

A failed post is reported on the console and never stops training.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from rich.console import Console

WEBHOOK_ENV = "SPEEDFLIP_DISCORD_WEBHOOK"


def milestone_text(path: Path | None, meta: dict[str, Any], elo: float) -> str:
    def fmt(key: str) -> str:
        value = meta.get(key)
        return "-" if value is None else f"{value:.3g}"

    return (
        f"speedflip milestone {path.name if path else '-'} ({meta.get('phase', '-')}): "
        f"reward {fmt('episode_reward_mean')}, touches/min {fmt('touches_per_minute')}, "
        f"entropy {fmt('entropy')}, Elo {elo:.0f}"
    )


def post_webhook(url: str, text: str, timeout_seconds: float = 5.0) -> str | None:
    """POST ``{"content": text}``; returns None on success or the reason it failed."""
    try:  # building the request raises ValueError for a malformed URL (e.g. no http:// scheme)
        request = urllib.request.Request(
            url, data=json.dumps({"content": text}).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=timeout_seconds) as response:
            status = int(response.status)
    except (urllib.error.URLError, OSError, ValueError) as err:
        return f"{type(err).__name__}: {err}"
    return None if 200 <= status < 300 else f"HTTP {status}"


def post_milestone(path: Path | None, meta: dict[str, Any], elo: float, console: Console) -> None:
    url = os.environ.get(WEBHOOK_ENV)
    if not url:
        return
    failure = post_webhook(url, milestone_text(path, meta, elo))
    if failure:
        console.print(f"note: the Discord webhook post failed ({failure}); training goes on", soft_wrap=True)
