"""Shared type aliases."""

from typing import Any

import numpy.typing as npt

Array = npt.NDArray[Any]
