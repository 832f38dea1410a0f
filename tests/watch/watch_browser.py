"""Headless Chromium helpers for the page tests (imported as a module)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--hide-scrollbars",
    "--mute-audio",
)


def find_chromium() -> str | None:
    """The Chromium executable, or None where there is none."""
    for name in CANDIDATES:
        path = shutil.which(name) if not name.startswith("/") else (name if Path(name).is_file() else None)
        if path:
            return path
    return None


@dataclass
class BrowserRun:
    stdout: str
    console: list[str]  # page console lines (console.log/error and uncaught exceptions)
    seconds: float


def run_chromium(exe: str, url: str, *extra: str, budget_ms: int = 10000, timeout: float = 60.0) -> BrowserRun:
    """Open ``url`` headless with a fresh profile; returns stdout and the page's console lines."""
    import time

    with tempfile.TemporaryDirectory(prefix="speedflip-chromium-") as profile:
        args = [exe, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
                f"--virtual-time-budget={budget_ms}", *extra, url]  # fmt: skip
        start = time.perf_counter()
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
        seconds = time.perf_counter() - start
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return BrowserRun(proc.stdout, console, seconds)
