"""Stopping a run cleanly on a signal."""

from __future__ import annotations

import signal
from types import FrameType
from typing import Any


class StopFlag:
    """SIGINT/SIGTERM/SIGHUP set a flag so the loop saves and exits; a second signal exits at once."""

    def __init__(self) -> None:
        self.requested = False
        self.signal_name = ""
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self.signal_name = signal.Signals(signum).name

    def __enter__(self) -> StopFlag:
        signals = [signal.SIGINT, signal.SIGTERM]
        if hasattr(signal, "SIGHUP"):  # a closed terminal; not on Windows
            signals.append(signal.SIGHUP)
        for sig in signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
