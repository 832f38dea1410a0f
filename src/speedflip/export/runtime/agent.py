"""The exported bot's brain: state arrays -> the run's exact observation -> policy -> lookup-table controls.

One :class:`SpeedflipAgent` drives one car. It keeps what training kept per agent: the previous
controls, the boost-pad timers of the advanced observation and the stacked frames. Call
:meth:`SpeedflipAgent.reset` at the start of play (a kickoff) and :meth:`SpeedflipAgent.step` every
``tick_skip`` ticks after that; both return the action index and the 8 controls
(throttle, steer, pitch, yaw, roll, jump, boost, handbrake) to hold until the next decision.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from speedflip._types import Array
from speedflip.algos.normalize import RunningMeanStd
from speedflip.env import layout as L
from speedflip.env.arenas import GameArrays
from speedflip.env.obs import AdvancedObs, DefaultObs, PadTimers
from speedflip.export.runtime.policy import NumpyPolicy, TorchPolicy, read_safetensors

SETTINGS_FILE = "speedflip_bot.json"
WEIGHTS_FILE = "policy.safetensors"
FORMAT = "speedflip-bot-v1"


class AgentSetupError(RuntimeError):
    """The bot folder or the match does not fit the trained policy (the message says why)."""


def load_settings(folder: Path) -> dict[str, Any]:
    """The bot's settings file (observation, action table, tick skip, action delay, normalizer)."""
    path = folder / SETTINGS_FILE
    try:
        settings: dict[str, Any] = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise AgentSetupError(f"cannot read {path}: {err}") from None
    if settings.get("format") != FORMAT:
        raise AgentSetupError(f"{path} is not a speedflip bot settings file ({FORMAT})")
    return settings


class SpeedflipAgent:
    """Drives one car with the exported policy (deterministic: the most likely action)."""

    def __init__(self, folder: Path, backend: str = "auto") -> None:
        self.folder = Path(folder)
        self.settings = load_settings(self.folder)
        obs = self.settings["obs"]
        self.builder_name = str(obs["builder"])
        self.team_size = int(obs["team_size"])
        self.nearest_pads = int(obs.get("nearest_pads", 4))
        self.frame_stack = int(obs.get("frame_stack", 1))
        self.obs_dim = int(obs["obs_dim"])
        self.tick_skip = int(self.settings["tick_skip"])
        self.action_delay_ticks = int(self.settings["action_delay_ticks"])
        self.table = np.asarray(self.settings["action_table"], np.float32)
        pads = self.settings["pads"]
        self.pad_positions = np.asarray(pads["positions"], np.float32)
        self.pad_is_big = np.asarray(pads["big"], bool)
        tensors = read_safetensors(self.folder / WEIGHTS_FILE)
        self.normalize = bool(self.settings["normalize_obs"])
        # an ensemble keeps every member's layers and normalizer under members.<j>. (oldest first)
        count = int(self.settings.get("ensemble_members", 1))
        groups = [tensors] if count == 1 else [
            {k.removeprefix(f"members.{j}."): v for k, v in tensors.items() if k.startswith(f"members.{j}.")}
            for j in range(count)
        ]  # fmt: skip
        self.backend = self._pick_backend(backend)
        self.obs_rmss: list[RunningMeanStd] = []
        self.policies: list[NumpyPolicy | TorchPolicy] = []
        for group in groups:
            if "obs_rms.mean" not in group:
                raise AgentSetupError(f"{self.folder / WEIGHTS_FILE} lacks a member's weights ({count} expected)")
            rms = RunningMeanStd((self.obs_dim,))
            rms.load_state_dict(
                {"mean": group["obs_rms.mean"], "var": group["obs_rms.var"], "count": group["obs_rms.count"]}
            )
            self.obs_rmss.append(rms)
            self.policies.append(TorchPolicy(group) if self.backend == "torch" else NumpyPolicy(group))
            numpy_view = NumpyPolicy(group)
            if numpy_view.obs_dim != self.obs_dim or numpy_view.num_actions != len(self.table):
                raise AgentSetupError(
                    f"weights take {numpy_view.obs_dim} inputs and give {numpy_view.num_actions} actions, but the "
                    f"settings say {self.obs_dim} and {len(self.table)}"
                )
        self.obs_rms, self.policy = self.obs_rmss[-1], self.policies[-1]
        self._builder: DefaultObs | AdvancedObs | None = None
        self._sizes: tuple[int, int] | None = None
        self._timers: PadTimers | None = None
        self._frames: Array | None = None
        self.prev_controls = np.zeros(self.table.shape[1], np.float32)
        self.last_action = -1

    @staticmethod
    def _pick_backend(backend: str) -> str:
        if backend not in ("auto", "numpy", "torch"):
            raise AgentSetupError(f"backend must be auto, numpy or torch, not {backend!r}")
        if backend == "numpy":
            return "numpy"
        try:
            import torch  # noqa: F401
        except ImportError:
            if backend == "torch":
                raise AgentSetupError("backend 'torch' needs torch installed") from None
            return "numpy"
        return "torch"

    # ------------------------------------------------------------------ observation
    def _builder_for(self, blue_size: int, orange_size: int) -> DefaultObs | AdvancedObs:
        if self._builder is not None and self._sizes == (blue_size, orange_size):
            return self._builder
        builder: DefaultObs | AdvancedObs
        if self.builder_name == "advanced":
            builder = AdvancedObs(
                blue_size, orange_size, self.team_size, pad_positions=self.pad_positions,
                pad_is_big=self.pad_is_big, nearest_pads=self.nearest_pads, shuffle_slots=False,
            )  # fmt: skip
        else:
            builder = DefaultObs(blue_size, orange_size, self.team_size)
        size = builder.obs_dim * self.frame_stack
        if size != self.obs_dim:
            raise AgentSetupError(
                f"this bot was trained with observations of {self.obs_dim} floats; a {blue_size}v{orange_size} "
                f"match gives {size}. Play it at the team sizes it was trained for (up to {self.team_size} a side)."
            )
        self._builder, self._sizes = builder, (blue_size, orange_size)
        return builder

    def _frame(self, state: GameArrays, car_index: int, blue_size: int, orange_size: int) -> Array:
        builder = self._builder_for(blue_size, orange_size)
        prev = np.zeros((1, blue_size + orange_size, self.table.shape[1]), np.float32)
        prev[0, car_index] = self.prev_controls
        if isinstance(builder, AdvancedObs):
            assert self._timers is not None
            rows = builder.build(state, prev, self._timers.timers)
        else:
            rows = builder.build(state, prev)
        frame: Array = rows[car_index]
        return frame

    def observe_reset(self, state: GameArrays, car_index: int, blue_size: int, orange_size: int) -> Array:
        """The first observation of an episode (a kickoff): fresh previous controls, timers and frames."""
        self.prev_controls = np.zeros(self.table.shape[1], np.float32)
        self.last_action = -1
        self._timers = PadTimers(1, self.pad_is_big)
        self._timers.update(state.pads, 0.0)
        frame = self._frame(state, car_index, blue_size, orange_size)
        self._frames = np.repeat(frame[None], self.frame_stack, axis=0)
        return self._frames.reshape(-1).copy()

    def observe_step(
        self, state: GameArrays, car_index: int, blue_size: int, orange_size: int, seconds: float | None = None
    ) -> Array:
        """The observation ``seconds`` (default: one decision, tick_skip / 120 s) after the previous one."""
        if self._frames is None or self._timers is None:
            return self.observe_reset(state, car_index, blue_size, orange_size)
        dt = self.tick_skip / L.TICK_RATE if seconds is None else seconds
        self._timers.update(state.pads, dt)
        frame = self._frame(state, car_index, blue_size, orange_size)
        self._frames[:-1] = self._frames[1:].copy()
        self._frames[-1] = frame
        return self._frames.reshape(-1).copy()

    # ------------------------------------------------------------------ policy
    def logits(self, obs: Array) -> Array:
        """Policy outputs for raw observations ``[n, obs_dim]`` (normalized as in training). For an ensemble the log
        of the mean of its members' action probabilities (computed as speedflip's ``EnsemblePolicy`` does)."""
        outs = [
            policy.logits(rms.normalize(obs) if self.normalize else np.asarray(obs, np.float32))
            for policy, rms in zip(self.policies, self.obs_rmss, strict=True)
        ]
        if len(outs) == 1:
            return outs[0]
        if self.backend == "torch":
            import torch

            probs = torch.stack([torch.softmax(torch.from_numpy(out), -1) for out in outs]).mean(0).numpy()
        else:
            stacked = np.stack(outs).astype(np.float64)
            exp = np.exp(stacked - stacked.max(axis=-1, keepdims=True))
            probs = (exp / exp.sum(axis=-1, keepdims=True)).mean(axis=0)
        with np.errstate(divide="ignore"):
            mean_log: Array = np.log(probs).astype(np.float32)
        return mean_log

    def act(self, obs: Array) -> int:
        """The most likely action index for one raw observation; remembered as the previous controls."""
        action = int(np.argmax(self.logits(np.asarray(obs, np.float32)[None])[0]))
        self.last_action = action
        self.prev_controls = self.table[action].copy()
        return action

    def reset(self, state: GameArrays, car_index: int, blue_size: int, orange_size: int) -> tuple[int, Array]:
        """Start of play: observe and decide; returns ``(action index, controls [8])``."""
        action = self.act(self.observe_reset(state, car_index, blue_size, orange_size))
        return action, self.table[action].copy()

    def step(
        self, state: GameArrays, car_index: int, blue_size: int, orange_size: int, seconds: float | None = None
    ) -> tuple[int, Array]:
        """One decision (every ``tick_skip`` ticks); returns ``(action index, controls [8])``."""
        action = self.act(self.observe_step(state, car_index, blue_size, orange_size, seconds))
        return action, self.table[action].copy()
