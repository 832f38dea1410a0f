"""Command-line glue for Gymnasium runs: ``train --env gym:<id> --algo ...`` and one-argument ``eval``."""

from __future__ import annotations

import json
from pathlib import Path

from speedflip.config import Config, load_preset, resolve_config
from speedflip.gym.errors import GymEnvError

ALGOS = ("ppo", "ppo_recurrent", "dqn")
TASK_KEYS = ("gym.success", "gym.success_return", "gym.solved_return", "gym.random_return")
"""Keys that describe one task; reset to their defaults when ``--env`` swaps the preset's env."""


def parse_env_arg(text: str) -> str | None:
    """``--env`` value -> Gymnasium id: ``gym:CartPole-v1`` -> ``CartPole-v1``; ``rocketleague`` -> ``None``."""
    if text in ("rocketleague", "rl"):
        return None
    if not text.startswith("gym:") or not text[4:]:
        raise GymEnvError(
            f"--env '{text}' is not understood: use gym:<id> for a Gymnasium environment (e.g. "
            "gym:CartPole-v1, or gym:my_module:MyEnv-v0 to import your module first) or 'rocketleague'"
        )
    return text[4:]


def require_gymnasium() -> None:
    """Raise a :class:`GymEnvError` saying how to install Gymnasium when it is missing or too old."""
    try:
        import gymnasium
    except ImportError:
        raise GymEnvError(
            "Gymnasium runs need the gymnasium package: pip install 'speedflip[gym]' (or pip install 'gymnasium>=1.1')"
        ) from None
    major, minor = (int(part) for part in gymnasium.__version__.split(".")[:2])
    if (major, minor) < (1, 1):
        raise GymEnvError(
            f"gymnasium {gymnasium.__version__} is too old for speedflip's vector envs (same-step autoreset): "
            "pip install 'gymnasium>=1.1'"
        )


def resolve_train_config(
    preset: str | None, config_file: str | None, overrides: list[str], env: str | None, algo: str | None
) -> tuple[Config, str, list[str]]:
    """The config of ``speedflip train`` with ``--env``/``--algo``; returns ``(config, default run dir, notes)``.

    ``--env gym:<id>`` without ``--preset``/``--config`` starts from the classic-control defaults
    of ``cartpole-ppo`` (``cartpole-dqn`` for DQN). When the env differs from the preset's, the
    preset's task settings (success rule, solved threshold) are reset to the new env's defaults.
    The user's ``--set`` overrides always come last.
    """
    notes: list[str] = []
    extra: list[str] = []
    user_preset = preset
    env_id = parse_env_arg(env) if env is not None else None
    if env is not None and env_id is None:
        extra.append("gym.env_id=null")
    if env_id is not None:
        require_gymnasium()
        from speedflip.gym.envs import check_env_id

        check_env_id(env_id)
        if preset is None and config_file is None:
            preset = "cartpole-dqn" if algo == "dqn" else "cartpole-ppo"
            notes.append(f"--env without --preset: hyperparameters from the preset '{preset}' (classic control)")
        base_env = (load_preset(preset or "quick").get("gym") or {}).get("env_id")
        extra.append(f"gym.env_id={json.dumps(env_id)}")
        if base_env is not None and base_env != env_id:
            extra += [f"{key}=null" for key in TASK_KEYS if key != "gym.success"] + ["gym.success=auto"]
    if algo is not None:
        extra.append(f"algo={algo}")
    cfg = resolve_config(preset, config_file, [*extra, *overrides])
    if user_preset is not None:
        run_name = user_preset
    elif cfg.gym.env_id is not None:
        run_name = f"{cfg.gym.env_id}-{cfg.algo}".replace(":", "_").replace("/", "_")
    else:
        run_name = "quick"
    return cfg, f"runs/{run_name}", notes


def gym_checkpoint(spec: str) -> Path | None:
    """The checkpoint ``speedflip eval SPEC`` would evaluate if SPEC is a Gymnasium run, else ``None``."""
    from speedflip.checkpoint import CheckpointError
    from speedflip.gym.evaluate import find_checkpoint, is_gym_checkpoint

    path = Path(spec)
    if not path.is_dir():
        return None
    try:
        found, _ = find_checkpoint(spec)
    except CheckpointError:
        return None  # not a usable gym run: the Rocket League path reports what is wrong
    return found if is_gym_checkpoint(found) else None
