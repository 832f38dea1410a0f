"""K RocketSim arenas stepped together, their state exported as numpy arrays.

The only per-arena Python work is the physics call (which releases the GIL), the control hand-off
(one call per car) and reading the state; everything downstream works on the arrays.

A demolished car is respawned by RocketSim after 3 s on one of four spots behind its goal, picked with an
unseeded random number (the same command gave different evaluation games from one run to the next,
docs/learning.md, thirty-third session). The arenas replace that pick with one from their own seeded generator
(:meth:`Arenas._seed_respawns`), so a seed replays every game, demolitions included.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import RocketSim as rsim

from speedflip._types import Array
from speedflip.env import layout as L
from speedflip.env.sim import init_rocketsim

# the x of the four spots a demolished car respawns on, blue's side (orange: turned 180 degrees about z)
RESPAWN_SPOTS_X = np.array([x for x, _y, _yaw in rsim.RLConst.CAR_RESPAWN_LOCATIONS_SOCCAR], np.float64)


@dataclass
class GameArrays:
    """The state of every arena, as arrays. Axis ``p`` is the perspective (0 blue, 1 orange).

    - ``ball``: ``[K, 2, 25]``
    - ``cars``: ``[K, C, 2, 36]`` with cars ordered blue first, then orange
    - ``pads``: ``[K, 2, 34]`` (1 = active)
    - ``scores``: ``[K, 2]`` (blue, orange), goals since the arena was built
    """

    ball: Array
    cars: Array
    pads: Array
    scores: Array

    @classmethod
    def empty(cls, num_arenas: int, num_cars: int) -> GameArrays:
        return cls(
            ball=np.zeros((num_arenas, 2, L.BALL_WIDTH), np.float32),
            cars=np.zeros((num_arenas, num_cars, 2, L.CAR_WIDTH), np.float32),
            pads=np.zeros((num_arenas, 2, L.NUM_BOOST_PADS), np.float32),
            scores=np.zeros((num_arenas, 2), np.int64),
        )

    def copy(self) -> GameArrays:
        return GameArrays(self.ball.copy(), self.cars.copy(), self.pads.copy(), self.scores.copy())


class Arenas:
    """Owns ``num_arenas`` soccar arenas with ``blue_size`` blue and ``orange_size`` orange cars each.

    ``step(actions)`` applies one lookup-table row per car for ``tick_skip`` physics ticks. With
    ``action_delay_ticks=1`` (RLBot's behaviour) the previous controls stay on for the first tick of
    the step, exactly as a bot running in the real game experiences it.
    """

    def __init__(
        self,
        num_arenas: int,
        blue_size: int,
        orange_size: int,
        tick_skip: int = 8,
        action_delay_ticks: int = 1,
        num_threads: int = 1,
        meshes_dir: str | None = None,
        seed: int = 0,
    ) -> None:
        if num_arenas < 1:
            raise ValueError("num_arenas must be at least 1")
        if not (0 <= action_delay_ticks < tick_skip or (tick_skip == 1 and action_delay_ticks <= 1)):
            raise ValueError("action_delay_ticks must be smaller than tick_skip")
        init_rocketsim(meshes_dir)
        self.num_arenas = num_arenas
        self.blue_size = blue_size
        self.orange_size = orange_size
        self.num_cars = blue_size + orange_size
        self.tick_skip = tick_skip
        self.action_delay_ticks = action_delay_ticks
        self.car_teams = np.array([L.BLUE] * blue_size + [L.ORANGE] * orange_size, dtype=np.int64)
        self.arenas: list[rsim.Arena] = []
        self.cars: list[list[rsim.Car]] = []
        for _ in range(num_arenas):
            arena = rsim.Arena(rsim.GameMode.SOCCAR, memory_weight_mode=rsim.MemoryWeightMode.LIGHT, tick_rate=120)
            cars = [arena.add_car(rsim.Team.BLUE) for _ in range(blue_size)]
            cars += [arena.add_car(rsim.Team.ORANGE) for _ in range(orange_size)]
            self.arenas.append(arena)
            self.cars.append(cars)
        self.state = GameArrays.empty(num_arenas, self.num_cars)
        self.num_threads = max(1, min(num_threads, num_arenas))
        bounds = np.linspace(0, num_arenas, self.num_threads + 1).astype(int)
        self._chunks = [range(int(a), int(b)) for a, b in itertools.pairwise(bounds)]
        self._pool = ThreadPoolExecutor(self.num_threads) if self.num_threads > 1 else None
        self._controls: Sequence[rsim.CarControls] = ()
        self._actions = np.zeros((num_arenas, self.num_cars), np.int64)
        self._demoed = np.zeros((num_arenas, self.num_cars), bool)  # cars demolished before the current step
        # one generator per arena for the respawn spot after a demolition (threads step disjoint arenas)
        self._respawn_rngs = [np.random.default_rng([seed, k]) for k in range(num_arenas)]

    # ------------------------------------------------------------------ stepping
    def step(self, actions: Array, controls: Sequence[rsim.CarControls]) -> GameArrays:
        """Apply ``controls[actions[k, c]]`` to car ``c`` of arena ``k`` and simulate ``tick_skip`` ticks."""
        self._actions = actions.reshape(self.num_arenas, self.num_cars)
        self._controls = controls
        self._demoed = self.state.cars[:, :, 0, L.CAR_IS_DEMOED] > 0.5  # [K, C], read once for every arena
        if self._pool is None:
            self._step_chunk(self._chunks[0])
        else:
            for _ in self._pool.map(self._step_chunk, self._chunks):
                pass
        return self.state

    def _step_chunk(self, chunk: range) -> None:
        controls, delay, rest = (
            self._controls,
            self.action_delay_ticks,
            self.tick_skip - self.action_delay_ticks,
        )
        for k in chunk:
            arena = self.arenas[k]
            demoed = np.flatnonzero(self._demoed[k]).tolist() if self._demoed[k].any() else []
            if delay:
                arena.step(delay)
            for car, idx in zip(self.cars[k], self._actions[k].tolist(), strict=True):
                car.set_controls(controls[idx])
            if rest:
                arena.step(rest)
            if demoed:
                self._seed_respawns(k, demoed)
            self._read(k)

    def _seed_respawns(self, k: int, demoed: list[int]) -> None:
        """Move the cars of arena ``k`` that were demolished before this step and RocketSim respawned in it to a
        spot drawn from the arena's own generator: the four respawn spots of a team differ only in x, so the
        car keeps everything RocketSim gave it (height, rotation, boost, the ticks since) and its x is moved by
        the difference between the seeded spot and the one RocketSim picked."""
        spots_x = RESPAWN_SPOTS_X
        for c in demoed:
            car = self.cars[k][c]
            state = car.get_state()
            if state.is_demoed:
                continue  # still waiting for its respawn
            sign = 1.0 if car.team == rsim.Team.BLUE else -1.0  # orange's spots are blue's turned about z
            picked = spots_x[int(np.argmin(np.abs(sign * state.pos.x - spots_x)))]
            seeded = spots_x[int(self._respawn_rngs[k].integers(len(spots_x)))]
            state.pos = rsim.Vec(state.pos.x + sign * (seeded - picked), state.pos.y, state.pos.z)
            car.set_state(state)

    def step_physics_only(self, ticks: int) -> None:
        """Raw physics for every arena (the benchmark's limit): no controls, no state read."""

        def run(chunk: range) -> None:
            for k in chunk:
                self.arenas[k].step(ticks)

        if self._pool is None:
            run(self._chunks[0])
        else:
            for _ in self._pool.map(run, self._chunks):
                pass

    # ------------------------------------------------------------------ state
    def _read(self, k: int) -> None:
        try:
            gym = self.arenas[k].get_gym_state()
        except RuntimeError as err:
            if "NaN" not in str(err):
                raise
            # RocketSim refuses to export a state with NaN in it: mark the arena so the env resets it
            self.state.ball[k] = np.nan
            self.state.cars[k] = np.nan
            return
        st = self.state
        st.scores[k, 0] = int(gym[0][L.INFO_BLUE_SCORE])
        st.scores[k, 1] = int(gym[0][L.INFO_ORANGE_SCORE])
        st.pads[k] = gym[1]
        st.ball[k] = gym[2]
        for c in range(self.num_cars):
            st.cars[k, c] = gym[3 + c]

    def read_all(self) -> GameArrays:
        for k in range(self.num_arenas):
            self._read(k)
        return self.state

    def release_controls(self, k: int) -> None:
        """Clear the controls of every car in arena ``k`` (used after a reset)."""
        neutral = rsim.CarControls()
        for car in self.cars[k]:
            car.set_controls(neutral)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
