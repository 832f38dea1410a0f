"""Replays: recording in RocketSim, the data file, the page encoding, the CLI, the milestone hook."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from speedflip.cli import main
from speedflip.env import layout as L
from speedflip.watch.errors import ReplayError
from speedflip.watch.page import POS_SCALE, QUAT_SCALE, build_page, encode_channels
from speedflip.watch.recorder import Replay
from speedflip.watch.run import data_path_for, record_milestone_replay, watch_match


@pytest.fixture(scope="module")
def replay() -> Replay:
    """20 s of the rule bot against an idle car: it scores several goals."""
    return watch_match("rule", "idle", team_size=1, seconds=20.0, seed=0)


def test_frames_cuts_and_goal_frames(replay: Replay) -> None:
    goals = replay.meta["goals"]
    assert goals[0] >= 1 and goals[1] == 0, "the rule bot scores against an idle car within 20 s"
    steps = int(np.ceil(20.0 * L.TICK_RATE / 8))
    assert replay.num_frames == 1 + steps + sum(goals)  # start frame + one per step + one kickoff per goal
    cuts = np.flatnonzero(replay.cut)
    assert cuts[0] == 0 and len(cuts) == 1 + sum(goals)
    for frame in cuts[1:]:
        # the frame before a cut is the goal itself: the ball is past the goal line, inside the goal
        assert abs(replay.ball[frame - 1, 1]) > L.BACK_WALL_Y
        # the cut frame is a kickoff: the ball at rest at the centre, the clock unchanged
        np.testing.assert_allclose(replay.ball[frame, :2], [0.0, 0.0], atol=1e-3)
        assert replay.clock[frame] == replay.clock[frame - 1]
    assert replay.scores[-1].tolist() == goals
    assert replay.seconds == pytest.approx(steps * 8 / 120)
    assert np.all(np.diff(replay.clock) >= 0)


def test_quaternion_convention_matches_rocketsim(replay: Replay) -> None:
    """The page turns quaternions into axes with this formula; it must give RocketSim's forward and up."""
    from speedflip.env.vec_env import RocketLeagueVecEnv
    from speedflip.selfplay.match import match_env_config

    env = RocketLeagueVecEnv(match_env_config(4, 2, 10.0).model_copy(update={"state_setters": {"random": 1.0}}), seed=5)
    try:
        env.reset()
        cars = env.state.cars[:, :, 0].reshape(-1, L.CAR_WIDTH)
    finally:
        env.close()
    w, x, y, z = cars[:, L.CAR_QUAT].T.astype(np.float64)
    forward = np.stack([1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)], axis=1)
    up = np.stack([2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)], axis=1)
    np.testing.assert_allclose(forward, cars[:, L.CAR_FORWARD], atol=1e-4)
    np.testing.assert_allclose(up, cars[:, L.CAR_UP], atol=1e-4)


def test_save_load_roundtrip(replay: Replay, tmp_path: Path) -> None:
    path = replay.save(tmp_path / "r.replay.npz")
    back = Replay.load(path)
    for name in ("ball", "cars", "boost", "flags", "pads", "scores", "cut", "clock"):
        np.testing.assert_array_equal(getattr(back, name), getattr(replay, name))
    assert back.meta == replay.meta


def test_load_rejects_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ReplayError, match="does not exist"):
        Replay.load(tmp_path / "missing.npz")
    bad = tmp_path / "bad.npz"
    bad.write_text("not a zip")
    with pytest.raises(ReplayError, match="not a speedflip replay"):
        Replay.load(bad)
    other = tmp_path / "other.npz"
    np.savez(other, x=np.zeros(3))
    with pytest.raises(ReplayError, match="lacks"):
        Replay.load(other)


def _decode(blob: bytes, layout: list[dict[str, object]]) -> dict[str, np.ndarray]:
    """What the page's decodeChannels does, in numpy."""
    out = {}
    for ch in layout:
        shape = [int(s) for s in ch["shape"]]  # type: ignore[union-attr]
        count = int(np.prod(shape))
        arr = np.frombuffer(blob, dtype=np.dtype(str(ch["dtype"])).newbyteorder("<"), count=count,
                            offset=int(ch["offset"])).reshape(shape)  # type: ignore[call-overload]  # fmt: skip
        if ch["delta"]:
            arr = np.cumsum(arr.astype(np.int64), axis=0)
            arr = ((arr + 32768) % 65536 - 32768).astype(np.int16)
        out[str(ch["name"])] = arr
    return out


def test_page_encoding_restores_the_arrays(replay: Replay) -> None:
    blob, layout = encode_channels(replay)
    assert all(int(ch["offset"]) % 4 == 0 for ch in layout)
    data = _decode(blob, layout)
    np.testing.assert_allclose(data["ball_pos"] * POS_SCALE, replay.ball[:, :3], atol=POS_SCALE / 2 + 1e-6)
    np.testing.assert_allclose(data["car_pos"] * POS_SCALE, replay.cars[:, :, :3], atol=POS_SCALE / 2 + 1e-6)
    np.testing.assert_allclose(data["car_rot"] * QUAT_SCALE, replay.cars[:, :, 3:], atol=QUAT_SCALE)
    np.testing.assert_array_equal(data["pads"], replay.pads)
    np.testing.assert_array_equal(data["cut"].astype(bool), replay.cut)
    np.testing.assert_array_equal(data["scores"], replay.scores)


def test_page_is_self_contained(replay: Replay) -> None:
    hostile = Replay(**{**replay.__dict__, "meta": {**replay.meta, "blue_name": "</script><script>alert(1)"}})
    page = build_page(hostile)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert "http://" not in page and "https://" not in page
    assert page.count("</script>") == 3  # meta, data, viewer: the hostile name is escaped
    meta = json.loads(re.search(r'<script id="replay-meta" type="application/json">(.*?)</script>', page, re.S)[1])
    assert meta["blue_name"] == "</script><script>alert(1)"
    assert meta["encoding"]["compression"] == "gzip"


def test_cli_watch_writes_page_and_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "F.html"
    assert main(["watch", "rule", "--vs", "idle", "--seconds", "20", "--out", str(out)]) == 0
    assert out.is_file() and data_path_for(out).is_file()
    text = out.read_text()
    assert "<script src" not in text and "<link" not in text
    printed = capsys.readouterr().out
    assert "replay page" in printed and "F.replay.npz" in printed
    again = tmp_path / "again.html"
    assert main(["watch", "--from", str(data_path_for(out)), "--out", str(again)]) == 0
    assert again.is_file()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["watch", "rule", "--seconds", "0", "--out", "x.html"], "--seconds must be positive"),
        (["watch", "rule", "--out", "x.txt"], "must name an .html file"),
        (["watch", "nosuchrun", "--seconds", "1", "--out", "x.html"], "neither a policy name"),
        (["watch", "--out", "x.html"], "needs a player"),
        (["watch", "--from", "missing.npz", "--out", "x.html"], "does not exist"),
    ],
)
def test_cli_watch_bad_input(
    argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in " ".join(err.split()) and "Traceback" not in err


def test_cli_watch_checkpoint_of_other_obs_layout(
    tiny_run_2v2: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["watch", str(tiny_run_2v2), "--team-size", "1", "--seconds", "2", "--out", str(tmp_path / "x.html")]
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "obs size 153" in err and "--team-size" in err


def test_checkpoint_watch_and_milestone_hook(tiny_run_2v2: Path, tmp_path: Path) -> None:
    replay = watch_match(str(tiny_run_2v2), "rule", team_size=2, seconds=3.0)
    assert replay.cars.shape[1] == 4 and replay.meta["blue_size"] == 2
    checkpoint = next((tiny_run_2v2 / "checkpoints").iterdir())
    page, data = record_milestone_replay(checkpoint, tmp_path / "replays", seconds=3.0)
    assert page.is_file() and data.is_file() and page.name.endswith(f"-{checkpoint.name}.html")
    assert Replay.load(data).meta["blue_size"] == 2
