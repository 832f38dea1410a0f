"""Loading RocketSim and its collision meshes, with errors a person can act on."""

from __future__ import annotations

import os
from pathlib import Path

import RocketSim as rsim

_initialized_with: Path | None = None


class SimSetupError(RuntimeError):
    """RocketSim or its collision meshes are missing or unusable."""


def default_meshes_dir() -> Path:
    """The soccar collision meshes shipped by ``rlgym-rocket-league``."""
    import rlgym.rocket_league.sim as rlgym_sim

    return Path(os.path.dirname(os.path.realpath(rlgym_sim.__file__))) / "collision_meshes"


def init_rocketsim(meshes_dir: str | Path | None = None) -> Path:
    """Initialise RocketSim once per process from a collision-meshes folder.

    ``RocketSim.init`` does not complain about a bad path (the failure shows up at the first
    Arena), so the folder is checked here and the error says what is missing.
    """
    global _initialized_with
    path = Path(meshes_dir) if meshes_dir is not None else default_meshes_dir()
    if _initialized_with is not None:
        return _initialized_with
    soccar = path / "soccar"
    if not soccar.is_dir() or not any(soccar.glob("*.cmf")):
        raise SimSetupError(
            f"RocketSim collision meshes not found: expected '{soccar}' to hold mesh_*.cmf files. "
            "They ship with the 'rlgym-rocket-league' package: reinstall it with "
            "`pip install --force-reinstall rlgym-rocket-league`, or point env.meshes_dir at a "
            "folder that contains soccar/mesh_*.cmf."
        )
    rsim.init(str(path))
    _initialized_with = path
    return path
