"""Where a run or checkpoint came from: the code's git commit and a hash of the resolved config."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from speedflip.config import Config, config_to_dict


def config_hash(cfg: Config) -> str:
    """12 hex digits of the SHA-256 of the resolved config (keys sorted)."""
    text = json.dumps(config_to_dict(cfg), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def git_commit() -> str | None:
    """The short commit of the speedflip checkout this runs from (None outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
