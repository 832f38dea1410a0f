"""Errors of the export tools (a light module: the command line imports it at start)."""

from __future__ import annotations


class ExportError(ValueError):
    """An export that cannot be done as asked; the message says why and what to do."""
