"""Metric sinks: JSON lines, TensorBoard and the console line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from speedflip.jsonsafe import dumps


class JsonlSink:
    """Appends one JSON object per iteration to ``metrics.jsonl`` (flushed every write)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(dumps(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class TensorBoardSink:
    """Scalars under ``charts/``, ``losses/``, ``perf/``, ``rewards/<component>``."""

    def __init__(self, log_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(log_dir))

    def write(self, record: dict[str, Any]) -> None:
        step = int(record["global_step"])
        for key, value in record.items():
            if "/" in key and isinstance(value, (int, float)) and value == value:
                self.writer.add_scalar(key, float(value), step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
