"""Episode metrics from the env on real RocketSim, against a plain per-car reference loop over the
states the physics produced, and turtle recovery with and without jumping."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import RocketSim as rsim

from speedflip._types import Array
from speedflip.env import layout as L
from speedflip.env.actions import LookupTableAction
from speedflip.env.arenas import GameArrays
from speedflip.env.episodes import EPISODE_METRICS
from speedflip.env.vec_env import RocketLeagueVecEnv

TICK_SKIP = 8


def _row(lookup: LookupTableAction, controls: list[float]) -> int:
    hits = np.flatnonzero(np.all(lookup.table == np.array(controls, np.float32), axis=1))
    assert hits.size == 1
    return int(hits[0])


def reference(cars_seq: list[Array], car: int) -> dict[str, float]:
    """One car's counts from its rows ``[36]`` (reset state first, then the state after each step),
    computed step by step in plain Python."""
    rows = [cars[car] for cars in cars_seq]

    def turtled(row: Array) -> bool:
        return bool(row[L.CAR_UP][2] < -0.7 and row[L.CAR_POS][2] < 300.0 and row[L.CAR_IS_DEMOED] < 0.5)

    out = dict.fromkeys(("touches", "air", "speed", "boost", "events", "recovered", "ticks"), 0.0)
    is_open = was = turtled(rows[0])
    out["events"] = float(is_open)
    start = 0
    for i in range(1, len(rows)):
        row, prev = rows[i], rows[i - 1]
        demoed, on_ground, now = row[L.CAR_IS_DEMOED] > 0.5, row[L.CAR_ON_GROUND] > 0.5, turtled(row)
        out["touches"] += float(row[L.CAR_HIT_LAST_STEP] > 0.5)
        out["air"] += float(not (on_ground or now or demoed))
        out["speed"] += float(np.linalg.norm(row[L.CAR_VEL].astype(np.float64)))
        spent = float(prev[L.CAR_BOOST]) - float(row[L.CAR_BOOST])
        if spent > 0 and not demoed and prev[L.CAR_IS_DEMOED] < 0.5:
            out["boost"] += spent
        if now and not was and not is_open:
            out["events"] += 1
            is_open, start = True, i * TICK_SKIP
        if is_open and on_ground and not now:
            out["recovered"] += 1
            out["ticks"] += i * TICK_SKIP - start
            is_open = False
        if demoed:
            is_open = False
        was = now
    for name, column in (
        ("goals", L.CAR_GOALS),
        ("shots", L.CAR_SHOTS),
        ("saves", L.CAR_SAVES),
        ("demos", L.CAR_DEMOS),
    ):
        out[name] = float(rows[-1][column] - rows[0][column])
    return out


def expected_episode(cars_seq: list[Array], num_cars: int) -> dict[str, float]:
    per_car = [reference(cars_seq, c) for c in range(num_cars)]
    steps = len(cars_seq) - 1

    def mean(key: str) -> float:
        return float(np.mean([p[key] for p in per_car]))

    events = sum(p["events"] for p in per_car)
    recovered = sum(p["recovered"] for p in per_car)
    return {
        "touches": mean("touches"),
        "goals": mean("goals"),
        "shots": mean("shots"),
        "saves": mean("saves"),
        "demos": mean("demos"),
        "air_fraction": mean("air") / steps,
        "mean_speed": mean("speed") / steps,
        "boost_used": mean("boost"),
        "turtle_events": mean("events"),
        "recovery_rate": recovered / events if events else 0.0,
        "ticks_to_recover": sum(p["ticks"] for p in per_car) / recovered if recovered else 0.0,
        "mechanics": 0.0,
    }


def test_env_episode_metrics_match_a_per_car_reference(
    make_env: Callable[..., RocketLeagueVecEnv], monkeypatch: pytest.MonkeyPatch
) -> None:
    """4 arenas of 2v1 with random actions from kickoffs, random and turtled starts, 2 s episodes: every
    finished episode's metrics equal the reference loop over the states the physics returned."""
    env = make_env(
        num_arenas=4,
        blue_size=2,
        orange_size=1,
        timeout_seconds=2.0,
        state_setters={"kickoff": 1.0, "random": 1.0, "turtled": 1.0},
    )
    physics: list[GameArrays] = []
    step_physics = env.arenas.step

    def spy(*args: object, **kwargs: object) -> GameArrays:
        state = step_physics(*args, **kwargs)  # type: ignore[arg-type]
        physics.append(state.copy())  # before the env resets the arenas whose episode ended
        return state

    monkeypatch.setattr(env.arenas, "step", spy)
    env.reset()
    seqs = {k: [env.state.cars[k, :, 0].copy()] for k in range(env.num_arenas)}
    rng = np.random.default_rng(7)
    checked, events, recovered, touches = 0, 0.0, 0.0, 0.0
    for _ in range(90):
        result = env.step(rng.integers(0, env.num_actions, env.num_agents))
        for k in range(env.num_arenas):
            seqs[k].append(physics[-1].cars[k, :, 0].copy())
        done = (result.terminated | result.truncated).reshape(env.num_arenas, -1)[:, 0]
        for k, episode in zip(np.flatnonzero(done).tolist(), result.episodes, strict=True):
            want = expected_episode(seqs[k], env.num_cars)
            got = {name: episode[name] for name in EPISODE_METRICS}
            assert got == pytest.approx(want, rel=1e-6, abs=1e-9), f"arena {k}"
            checked += 1
            events += got["turtle_events"]
            recovered += got["recovery_rate"] * got["turtle_events"]
            touches += got["touches"]
            seqs[k] = [env.state.cars[k, :, 0].copy()]
    assert checked >= 12
    assert events > 0 and recovered > 0, "the run should cover turtles and recoveries"


@pytest.mark.parametrize(("press_jump", "rate"), [(True, 1.0), (False, 0.0)])
def test_turtled_start_recovery(
    make_env: Callable[..., RocketLeagueVecEnv], lookup: LookupTableAction, press_jump: bool, rate: float
) -> None:
    """Every car starts on its roof (one turtle event each). Holding jump, RocketSim rolls it back onto
    its wheels well within the 2 s episode; idle, it stays there and never counts as airborne."""
    env = make_env(num_arenas=2, blue_size=1, orange_size=1, timeout_seconds=2.0, state_setters={"turtled": 1.0})
    row = _row(lookup, [0, 0, 0, 0, 0, 1.0 if press_jump else 0.0, 0, 0])
    env.reset()
    episodes = []
    for _ in range(30):
        episodes += env.step(np.full(env.num_agents, row)).episodes
    assert len(episodes) == 2
    for episode in episodes:
        assert episode["turtle_events"] == 1.0
        assert episode["recovery_rate"] == rate
        if press_jump:
            assert 0.0 < episode["ticks_to_recover"] <= 180.0
            assert episode["air_fraction"] > 0.0, "rolling over goes through the air"
        else:
            assert episode["ticks_to_recover"] == 0.0
            assert episode["air_fraction"] == 0.0 and episode["boost_used"] == 0.0


def test_driving_into_the_ball_counts_touches_speed_and_boost(
    make_env: Callable[..., RocketLeagueVecEnv], lookup: LookupTableAction
) -> None:
    """1v0 from the centre-back kickoff spot (0, -4608), full throttle and boost straight at the ball for
    3 s: at least one touch; at least the starting 33.3 boost spent (plus what the pads on the centre line
    give) and at most 3 s x 33.3 per second = 100; fast on average."""
    env = make_env(num_arenas=1, blue_size=1, orange_size=0, timeout_seconds=3.0, state_setters={"kickoff": 1.0})
    row = _row(lookup, [1.0, 0, 0, 0, 0, 0, 1.0, 0])
    env.reset()
    state = rsim.CarState()
    state.pos = rsim.Vec(0.0, -4608.0, L.CAR_REST_Z)
    state.rot_mat = rsim.Angle(np.pi / 2, 0.0, 0.0).as_rot_mat()
    state.boost = 100.0 / 3.0
    env.arenas.cars[0][0].set_state(state)
    env.arenas.read_all()
    episodes = []
    for _ in range(45):
        episodes += env.step(np.array([row])).episodes
    (episode,) = episodes
    assert episode["touches"] >= 1.0
    assert 100.0 / 3.0 - 1e-3 <= episode["boost_used"] <= 100.0 + 1e-3
    assert episode["mean_speed"] > 900.0
    assert episode["air_fraction"] < 0.5
