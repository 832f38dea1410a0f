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


def measure_load(exe: str, url: str, timeout: float = 60.0) -> dict[str, float | str]:
    """Real (not virtual) time for the page to reach ``data-replay-status="ready"``, via the DevTools
    protocol over a pipe (``--remote-debugging-pipe``: no network port, no websocket library).

    Returns the page's own ``replayLoadMs`` (navigation start -> first frame drawn) and the wall time
    from the navigate command to the ready status seen by polling.
    """
    import json
    import os
    import time

    with tempfile.TemporaryDirectory(prefix="speedflip-chromium-") as profile:
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        args = [exe, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]

        def child_fds() -> None:  # the protocol pipe is fd 3 (commands in) and fd 4 (replies out)
            a, b = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        proc = subprocess.Popen(
            args, pass_fds=(3, 4, to_browser_r, from_browser_w), preexec_fn=child_fds,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_browser_r)
        os.close(from_browser_w)
        reader = os.fdopen(from_browser_r, "rb")
        buffer = b""
        counter = 0

        def call(method: str, params: dict[str, object] | None = None, session: str | None = None) -> dict:  # type: ignore[type-arg]
            nonlocal buffer, counter
            counter += 1
            message: dict[str, object] = {"id": counter, "method": method, "params": params or {}}
            if session:
                message["sessionId"] = session
            os.write(to_browser_w, json.dumps(message).encode() + b"\0")
            while True:
                while b"\0" not in buffer:
                    chunk = os.read(reader.fileno(), 65536)
                    if not chunk:
                        raise RuntimeError("the browser closed the pipe")
                    buffer += chunk
                raw, buffer = buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == counter:
                    if "error" in reply:
                        raise RuntimeError(str(reply["error"]))
                    return reply.get("result", {})  # type: ignore[no-any-return]

        try:
            target = call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            start = time.perf_counter()
            call("Page.navigate", {"url": url}, session)
            status, load_ms = "loading", "nan"
            while time.perf_counter() - start < timeout:
                expr = "[document.documentElement.dataset.replayStatus, document.documentElement.dataset.replayLoadMs]"
                value = call("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session)
                status, load_ms = value["result"].get("value") or ["loading", "nan"]
                if status in ("ready", "error"):
                    break
                time.sleep(0.01)
            wall = time.perf_counter() - start
            draw_ms = float("nan")
            if status == "ready":
                bench = (
                    "(() => { const v = window.speedflipViewer, t0 = performance.now();"
                    " for (let i = 0; i < 60; i++) { v.time = (i / 60) * v.duration; v.draw(); }"
                    " return (performance.now() - t0) / 60; })()"
                )
                draw_ms = float(
                    call("Runtime.evaluate", {"expression": bench, "returnByValue": True}, session)["result"]["value"]
                )
        finally:
            proc.kill()
            proc.wait()
            reader.close()
            os.close(to_browser_w)
    return {"status": str(status), "page_load_ms": float(load_ms or "nan"), "wall_seconds": wall, "draw_ms": draw_ms}


if __name__ == "__main__":
    import sys

    exe = find_chromium()
    if exe is None:
        sys.exit("Chromium is not installed (apt-get install chromium)")
    for page in sys.argv[1:]:
        for _ in range(3):
            print(page, measure_load(exe, Path(page).resolve().as_uri()))
