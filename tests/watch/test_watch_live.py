"""``--render``: fail-soft without RLViser; pacing, segments and rlviser-py's packets with a fake RLViser."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from speedflip.cli import main
from speedflip.env import layout as L
from speedflip.watch.live import DISABLED_MESSAGE, RLVISER_PORT, LiveView, render_args, rlviser_status
from speedflip.watch.recorder import make_recording_env, pad_positions


def _port_free(port: int) -> bool:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(("0.0.0.0", port))
    except OSError:
        return False
    finally:
        s.close()
    return True


needs_free_port = pytest.mark.skipif(not _port_free(RLVISER_PORT), reason="a real RLViser is running here")


@needs_free_port
def test_without_rlviser_render_is_disabled_and_the_command_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no ./rlviser here
    assert not rlviser_status().available
    said: list[str] = []
    assert LiveView.open(8, [0, 1], [[0.0, 0.0, 73.0]] * 34, say=said.append) is None
    assert said and said[0].startswith(DISABLED_MESSAGE)
    out = tmp_path / "m.html"
    assert main(["watch", "rule", "--vs", "idle", "--seconds", "2", "--out", str(out), "--render"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert DISABLED_MESSAGE in printed and out.is_file()


def test_missing_rlviser_py_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "rlviser_py":
            raise ImportError("no rlviser_py")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    status = rlviser_status()
    assert not status.available and "pip install" in status.reason


def test_segments_play_at_real_time_without_blocking_the_pusher() -> None:
    env = make_recording_env(1, 10.0)
    sent: list[dict[str, Any]] = []
    view = LiveView(8, env.car_teams, pad_positions(env), segment_seconds=0.5, render=lambda **kw: sent.append(kw))
    try:
        env.reset()
        start = time.perf_counter()
        pushes = 0
        while time.perf_counter() - start < 1.0:
            env.step(np.zeros(env.num_agents, np.int64))
            view.push(env.state)
            pushes += 1
        elapsed = time.perf_counter() - start
    finally:
        view.close()
        env.close()
    # the training side ran many steps per real second; the view showed about 15 frames per second
    assert pushes > 60
    assert 0.5 * elapsed * 15 <= len(sent) <= 1.5 * elapsed * 15 + 2, (len(sent), elapsed)
    ticks = [kw["tick_count"] for kw in sent]
    assert ticks == sorted(ticks) and sent[0]["boost_pad_states"] == [True] * L.NUM_BOOST_PADS
    assert len(sent[0]["cars"]) == 2 and sent[0]["cars"][1][1] == 1  # (id, team, config, state)


@needs_free_port
def test_rlviser_py_packets_reach_a_listening_rlviser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("rlviser_py")
    monkeypatch.chdir(tmp_path)
    fake = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    fake.bind(("127.0.0.1", RLVISER_PORT))
    fake.settimeout(5.0)
    env = make_recording_env(1, 10.0)
    try:
        assert rlviser_status().available
        said: list[str] = []
        view = LiveView.open(8, env.car_teams, pad_positions(env), say=said.append, segment_seconds=0.3)
        assert view is not None, said
        env.reset()
        for _ in range(10):
            env.step(np.zeros(env.num_agents, np.int64))
            view.push(env.state)
        packets = []
        while len(packets) < 5:
            data, _ = fake.recvfrom(65536)
            packets.append(data)
        view.close()
        assert view.error is None
    finally:
        fake.close()
        env.close()
    kinds = [p[0] for p in packets if len(p) == 1]
    assert 1 in kinds, kinds  # GameState packets (after rlviser-py's connection byte)
    states = [p for p in packets if len(p) > 1]
    assert states and int.from_bytes(states[0][:8], "little") == 8  # tick count of the first frame


def test_render_args_build_rocketsim_states() -> None:
    env = make_recording_env(2, 10.0)
    try:
        env.reset()
        from speedflip.watch.live import frame_of

        args = render_args(frame_of(env.state, 0), env.car_teams, 8, 120.0)
    finally:
        env.close()
    car = args["cars"][0][3]
    np.testing.assert_allclose([car.pos.x, car.pos.y, car.pos.z], env.state.cars[0, 0, 0, L.CAR_POS], atol=1e-3)
    forward = car.rot_mat.forward
    np.testing.assert_allclose([forward.x, forward.y, forward.z], env.state.cars[0, 0, 0, L.CAR_FORWARD], atol=1e-5)
