"""Errors shared across parts of speedflip.

:class:`RunStoppedError` is a fault the run cannot continue through (a collection worker restarted too
often, training that keeps producing NaN/Inf). ``speedflip train`` catches it, saves a checkpoint of
the last good state and exits with status 1 and the error's message, which names the problem and the fix.
"""

from __future__ import annotations


class RunStoppedError(RuntimeError):
    """The run must stop: save the last good state, print the message, exit 1."""
