"""RLBot v5 entry point of an exported speedflip bot (``python bot.py``; RLBot starts it from bot.toml).

Each packet is turned into an ``rlgym_compat.GameState`` and then into the state arrays training used;
every ``tick_skip`` ticks the agent builds the run's exact observation and picks the most likely
action of the lookup table. RLBot applies a bot's input one tick after the packet it answers,
which is the one-tick action delay the run trained with (``action_delay_ticks = 1``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from rlbot import flat  # type: ignore[import-not-found, import-untyped, unused-ignore]  # noqa: E402
from rlbot.managers import Bot  # type: ignore[import-not-found, import-untyped, unused-ignore]  # noqa: E402
from rlgym_compat import GameState  # type: ignore[import-not-found, import-untyped, unused-ignore]  # noqa: E402

from speedflip.export.runtime.agent import SpeedflipAgent  # noqa: E402
from speedflip.export.runtime.convert import compat_to_arrays  # noqa: E402


class SpeedflipBot(Bot):  # type: ignore[misc, unused-ignore]
    """Plays with the exported policy; neutral controls outside kickoffs and open play."""

    agent: SpeedflipAgent
    game_state: Any

    def initialize(self) -> None:
        self.agent = SpeedflipAgent(HERE)
        self.game_state = GameState.create_compat_game_state(self.field_info, self.match_config)
        self.controls = flat.ControllerState()
        self.last_decision: int | None = None
        self.logger.info(  # type: ignore[union-attr, unused-ignore]
            "speedflip bot ready: %s backend, tick skip %d, %d actions",
            self.agent.backend, self.agent.tick_skip, len(self.agent.table),
        )  # fmt: skip

    def get_output(self, packet: Any) -> Any:
        if packet.match_info.match_phase not in (flat.MatchPhase.Kickoff, flat.MatchPhase.Active):
            self.last_decision = None  # the next kickoff starts a new episode
            self.controls = flat.ControllerState()
            return self.controls
        self.game_state.update(packet)
        tick = int(packet.match_info.frame_num)
        if self.last_decision is not None and tick - self.last_decision < self.agent.tick_skip:
            return self.controls
        arrays, order, blue, orange = compat_to_arrays(self.game_state)
        me = order.index(self.player_id)
        if self.last_decision is None:
            _, c = self.agent.reset(arrays, me, blue, orange)
        else:
            seconds = (tick - self.last_decision) / 120.0
            _, c = self.agent.step(arrays, me, blue, orange, seconds)
        self.last_decision = tick
        self.controls = flat.ControllerState(
            throttle=float(c[0]), steer=float(c[1]), pitch=float(c[2]), yaw=float(c[3]), roll=float(c[4]),
            jump=bool(c[5] > 0.5), boost=bool(c[6] > 0.5), handbrake=bool(c[7] > 0.5),
        )  # fmt: skip
        return self.controls


if __name__ == "__main__":
    SpeedflipBot("speedflip/__AGENT_ID__").run()
