"""Gymnasium environments: id checks with clear messages, vector envs, observation encoding.

Vector envs use ``AutoresetMode.SAME_STEP``: the step that ends an episode already returns the
first observation of the next one, and the episode's *final* observation comes in
``info["final_obs"]`` (masked by ``info["_final_obs"]``). Learners bootstrap a truncated episode
from that final observation, never from the reset one.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from speedflip._types import Array
from speedflip.gym.errors import GymEnvError

LIST_IDS_HINT = 'list the registered ids with: python -c "import gymnasium; gymnasium.pprint_registry()"'


def check_env_id(env_id: str) -> str:
    """Make sure ``env_id`` is registered (importing ``module:`` first); returns the bare id."""
    name = env_id
    if ":" in env_id:
        module, name = env_id.split(":", 1)
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise GymEnvError(f"Gymnasium env '{env_id}': cannot import module '{module}' ({err})") from None
    if name not in gym.registry:
        close = difflib.get_close_matches(name, list(gym.registry), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise GymEnvError(f"unknown Gymnasium environment id '{name}'.{hint} To see every id, {LIST_IDS_HINT}")
    return name


@dataclass(frozen=True)
class SpaceInfo:
    """What the learners need from the spaces: the flat observation size and the action count."""

    obs_dim: int
    num_actions: int
    obs_kind: str  # "box" or "discrete"


def space_info(obs_space: gym.Space[Any], action_space: gym.Space[Any], env_id: str, algo: str) -> SpaceInfo:
    """Check the spaces are usable by ``algo``; raise :class:`GymEnvError` naming the problem otherwise."""
    if isinstance(obs_space, spaces.Box):
        obs_dim, kind = int(np.prod(obs_space.shape)), "box"
    elif isinstance(obs_space, spaces.Discrete):
        obs_dim, kind = int(obs_space.n), "discrete"
    else:
        raise GymEnvError(
            f"'{env_id}' has a {type(obs_space).__name__} observation space; speedflip handles Box and Discrete "
            "observations (wrap the env with gymnasium.wrappers.FlattenObservation for Dict/Tuple spaces)"
        )
    if not isinstance(action_space, spaces.Discrete):
        raise GymEnvError(
            f"--algo {algo} needs a discrete action space, but '{env_id}' has {action_space} "
            f"({type(action_space).__name__}). Pick an env with Discrete actions (e.g. CartPole-v1, "
            "Acrobot-v1, LunarLander-v3) or discretize the actions with a wrapper."
        )
    if int(action_space.start) != 0:
        raise GymEnvError(f"'{env_id}' has Discrete actions starting at {action_space.start}; only 0-based supported")
    return SpaceInfo(obs_dim, int(action_space.n), kind)


def encode_obs(obs: Array, info: SpaceInfo) -> Array:
    """A batch of raw observations -> ``[batch, obs_dim]`` float32 (Box flattened, Discrete one-hot)."""
    if info.obs_kind == "discrete":
        out = np.zeros((len(obs), info.obs_dim), np.float32)
        out[np.arange(len(obs)), np.asarray(obs, np.int64)] = 1.0
        return out
    return np.asarray(obs, np.float32).reshape(len(obs), info.obs_dim)


def make_gym_vec_env(env_id: str, num_envs: int, env_kwargs: dict[str, Any] | None = None) -> gym.vector.SyncVectorEnv:
    """``num_envs`` copies of ``env_id`` in one process, autoreset in the same step."""
    check_env_id(env_id)
    kwargs = dict(env_kwargs or {})

    def make() -> gym.Env[Any, Any]:
        return gym.make(env_id, **kwargs)

    try:
        return gym.vector.SyncVectorEnv(
            [make for _ in range(num_envs)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
        )
    except gym.error.DependencyNotInstalled as err:
        raise GymEnvError(f"Gymnasium env '{env_id}' needs an extra package: {err}") from None
    except TypeError as err:
        raise GymEnvError(f"Gymnasium env '{env_id}' rejected gym.env_kwargs {kwargs}: {err}") from None


def final_observations(obs: Array, info: dict[str, Any], done: Array) -> Array:
    """The last observation of every env: ``info['final_obs']`` where an episode just ended, else ``obs``."""
    if not done.any():
        return obs
    final = np.array(obs, copy=True)
    mask = info.get("_final_obs", done)
    for i in np.flatnonzero(mask):
        final[i] = info["final_obs"][i]
    return final


def reward_threshold(env_id: str) -> float | None:
    """The registered ``reward_threshold`` of ``env_id`` (CartPole-v1: 475), if any."""
    name = check_env_id(env_id)
    value = gym.spec(name).reward_threshold
    return None if value is None else float(value)


def max_episode_steps(env_id: str) -> int | None:
    """The registered time limit of ``env_id``, if any."""
    name = check_env_id(env_id)
    value = gym.spec(name).max_episode_steps
    return None if value is None else int(value)
