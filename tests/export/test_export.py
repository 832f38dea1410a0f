"""``speedflip export``: the RLBot v5 folder, parity with training, the packet path, ONNX/TorchScript, bad input."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from speedflip.checkpoint import META_CHECKSUM_KEY, _meta_digest
from speedflip.cli import main
from speedflip.export.exporter import read_source
from speedflip.export.parity import load_bundle, record_match, replay_through_bot


@pytest.fixture(scope="module")
def bot_1v1(run_1v1: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bots") / "bot1v1"
    assert main(["export", str(run_1v1), "--rlbot", str(out), "--name", "Tiny Bot"]) == 0
    return out


def test_bot_folder_contents(bot_1v1: Path) -> None:
    for name in ("bot.toml", "bot.py", "policy.safetensors", "speedflip_bot.json", "requirements.txt", "README.md"):
        assert (bot_1v1 / name).is_file(), name
    for name in ("obs.py", "layout.py", "normalize.py", "agent.py", "convert.py", "policy.py", "controls.py"):
        assert (bot_1v1 / "speedflip_runtime" / name).is_file(), name
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    toml = tomllib.loads((bot_1v1 / "bot.toml").read_text())
    assert toml["settings"]["agent_id"] == "speedflip/tiny-bot" and toml["settings"]["name"] == "Tiny Bot"
    assert "bot.py" in toml["settings"]["run_command_linux"]
    settings = json.loads((bot_1v1 / "speedflip_bot.json").read_text())
    assert settings["tick_skip"] == 8 and settings["action_delay_ticks"] == 1
    assert settings["obs"]["builder"] == "default" and settings["obs"]["obs_dim"] == 103
    assert len(settings["action_table"]) == 90 and len(settings["pads"]["positions"]) == 34
    # the observation builder is training's own source, imports pointed at the bundle
    obs_src = (bot_1v1 / "speedflip_runtime" / "obs.py").read_text()
    imports = [n for n in ast.walk(ast.parse(obs_src)) if isinstance(n, ast.ImportFrom | ast.Import)]
    modules = {n.module if isinstance(n, ast.ImportFrom) else n.names[0].name for n in imports}
    assert not any(m and m.startswith("speedflip") for m in modules) and "class DefaultObs" in obs_src


def test_bot_toml_loads_in_rlbot(bot_1v1: Path) -> None:
    config = pytest.importorskip("rlbot.config")
    player = config.load_player_config(bot_1v1 / "bot.toml", team=0)
    assert player.variety.name == "Tiny Bot" and player.variety.agent_id == "speedflip/tiny-bot"


def test_bot_runs_without_speedflip_or_torch(bot_1v1: Path) -> None:
    pytest.importorskip("rlbot")
    pytest.importorskip("rlgym_compat")
    code = (
        "import sys; sys.modules['speedflip'] = None; sys.modules['torch'] = None\n"
        "import importlib.util\n"
        "spec = importlib.util.spec_from_file_location('exported_bot', 'bot.py')\n"
        "bot = importlib.util.module_from_spec(spec); spec.loader.exec_module(bot)\n"
        "agent = bot.SpeedflipAgent(bot.HERE)\n"
        "print(agent.backend, agent.obs_dim, [m for m in sys.modules if m.startswith('speedflip.')])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=bot_1v1, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["numpy", "103", "[]"]


@pytest.mark.parametrize("backend", ["torch", "numpy"])
def test_parity_1v1(run_1v1: Path, bot_1v1: Path, backend: str) -> None:
    src = read_source(str(run_1v1))
    recording = record_match(src.checkpoint, src.obs_options, 1, steps=300, arenas=2, episode_seconds=5.0, seed=11)
    assert recording.reset[1:].any(), "the recording must include episode resets"
    result = replay_through_bot(bot_1v1, recording, backend=backend)
    assert result.backend == backend
    assert result.obs_mismatches == 0 and result.max_obs_diff == 0.0, result.summary()
    assert result.action_mismatches == 0, result.summary()


def test_parity_2v2_advanced_obs_frame_stack(run_2v2_advanced: Path, tmp_path: Path) -> None:
    out = tmp_path / "bot2v2"
    assert main(["export", str(run_2v2_advanced), "--rlbot", str(out)]) == 0
    settings = json.loads((out / "speedflip_bot.json").read_text())
    assert settings["obs"]["builder"] == "advanced" and settings["obs"]["frame_stack"] == 2
    src = read_source(str(run_2v2_advanced))
    recording = record_match(src.checkpoint, src.obs_options, 2, steps=200, arenas=2, episode_seconds=4.0, seed=5)
    result = replay_through_bot(out, recording, backend="torch")
    assert result.ok, result.summary()


def _packet_state(arena: object, pad_order: np.ndarray, tick: int) -> tuple[object, object]:
    """(FieldInfo, GamePacket) RLBot would send for a RocketSim arena (pads in a shuffled RLBot order)."""
    from rlbot import flat

    pads = arena.get_boost_pads()  # type: ignore[attr-defined]
    field = flat.FieldInfo(
        boost_pads=[flat.BoostPad(flat.Vector3(*pads[i].get_pos().as_tuple()), pads[i].is_big) for i in pad_order]
    )

    def physics(state: object) -> object:
        angle = state.rot_mat.as_angle()  # type: ignore[attr-defined]
        return flat.Physics(
            flat.Vector3(*state.pos.as_tuple()),  # type: ignore[attr-defined]
            flat.Rotator(angle.pitch, angle.yaw, angle.roll),
            flat.Vector3(*state.vel.as_tuple()),  # type: ignore[attr-defined]
            flat.Vector3(*state.ang_vel.as_tuple()),  # type: ignore[attr-defined]
        )

    players = []
    for car in arena.get_cars():  # type: ignore[attr-defined]
        st = car.get_state()
        players.append(
            flat.PlayerInfo(
                physics=physics(st),
                team=int(car.team),
                boost=float(st.boost),
                player_id=int(car.id),
                air_state=flat.AirState.OnGround if st.is_on_ground else flat.AirState.InAir,
                demolished_timeout=-1.0,
                hitbox=flat.BoxShape(118.00738, 84.19941, 36.159073),
                hitbox_offset=flat.Vector3(13.87566, 0.0, 20.754988),
            )
        )
    ball = arena.ball.get_state()  # type: ignore[attr-defined]
    active = [bool(p.get_state().is_active) for p in pads]
    packet = flat.GamePacket(
        players=players,
        boost_pads=[flat.BoostPadState(active[i], 0.0 if active[i] else 1.0) for i in pad_order],
        balls=[flat.BallInfo(physics=physics(ball), shape=flat.SphereShape(182.5))],
        match_info=flat.MatchInfo(match_phase=flat.MatchPhase.Active, frame_num=tick),
    )
    return field, packet


def test_packet_to_arrays_matches_rocketsim(bot_1v1: Path) -> None:
    """RLBot packet -> rlgym-compat -> the bot's arrays equal RocketSim's own arrays (float tolerance)."""
    pytest.importorskip("rlbot")
    compat = pytest.importorskip("rlgym_compat")
    from speedflip.env import layout as L
    from speedflip.env.vec_env import RocketLeagueVecEnv
    from speedflip.selfplay.match import match_env_config

    bundle = load_bundle(bot_1v1)
    env = RocketLeagueVecEnv(match_env_config(1, 2, 30.0).model_copy(update={"state_setters": {"random": 1.0}}), seed=3)
    rng = np.random.default_rng(0)
    try:
        env.reset()
        arena = env.arenas.arenas[0]
        pad_order = rng.permutation(34)
        game_state = None
        for step in range(30):
            env.step(rng.integers(0, env.num_actions, env.num_agents))
            field, packet = _packet_state(arena, pad_order, 8 * (step + 1))
            if game_state is None:
                game_state = compat.GameState.create_compat_game_state(field)
            game_state.update(packet)
            arrays, order, blue, orange = bundle.convert.compat_to_arrays(game_state)
            assert (blue, orange) == (2, 2)
            want = env.state
            ids = [int(c.id) for c in env.arenas.cars[0]]
            rows = [ids.index(i) for i in order]  # the bot orders cars blue first, like training
            for p in (0, 1):
                got_cars, want_cars = arrays.cars[0, :, p], want.cars[0, rows, p]
                for cols, atol in ((L.CAR_POS, 0.05), (L.CAR_VEL, 0.05), (L.CAR_ANG_VEL, 1e-4),
                                   (L.CAR_FORWARD, 1e-4), (L.CAR_RIGHT, 1e-4), (L.CAR_UP, 1e-4)):  # fmt: skip
                    np.testing.assert_allclose(got_cars[:, cols], want_cars[:, cols], atol=atol)
                np.testing.assert_allclose(got_cars[:, L.CAR_BOOST], want_cars[:, L.CAR_BOOST], atol=1e-3)
                np.testing.assert_allclose(arrays.ball[0, p, L.BALL_POS], want.ball[0, p, L.BALL_POS], atol=0.05)
                np.testing.assert_array_equal(arrays.pads[0, p], want.pads[0, p])
    finally:
        env.close()


def test_packet_path_parity(run_1v1: Path, bot_1v1: Path) -> None:
    """A RocketSim match sent as RLBot v5 packets through rlgym-compat and the bot: training's observations
    (to float precision: packets carry Euler angles) and the same actions."""
    pytest.importorskip("rlbot")
    compat = pytest.importorskip("rlgym_compat")
    from speedflip.env.vec_env import RocketLeagueVecEnv
    from speedflip.selfplay.match import match_env_config
    from speedflip.selfplay.policies import NeuralPolicy

    bundle = load_bundle(bot_1v1)
    src = read_source(str(run_1v1))
    env = RocketLeagueVecEnv(match_env_config(1, 1, 300.0, obs_options=src.obs_options), seed=4)
    policy = NeuralPolicy(src.checkpoint, env.obs_dim, env.num_actions, deterministic=True)
    agents = [bundle.agent.SpeedflipAgent(bot_1v1, backend="numpy") for _ in range(env.num_cars)]
    pad_order = np.random.default_rng(1).permutation(34)
    agree = total = 0
    max_diff = 0.0
    try:
        obs = env.reset()
        game_state = None
        for t in range(250):
            field, packet = _packet_state(env.arenas.arenas[0], pad_order, 8 * (t + 1))
            if game_state is None:
                game_state = compat.GameState.create_compat_game_state(field)
            game_state.update(packet)
            arrays, order, blue, orange = bundle.convert.compat_to_arrays(game_state)
            ids = [int(c.id) for c in env.arenas.cars[0]]
            actions = policy.act(obs, env.state, env.car_teams)
            for c, agent in enumerate(agents):
                row = order.index(ids[c])
                observe = agent.observe_reset if t == 0 else agent.observe_step
                got = observe(arrays, row, blue, orange)
                max_diff = max(max_diff, float(np.abs(got - obs[c]).max()))
                agree += agent.act(got) == int(actions[c])
                total += 1
                agent.prev_controls = env.actions.table[actions[c]].copy()  # stay in step with training
            result = env.step(actions)
            assert not (result.terminated | result.truncated).any()
            obs = result.obs
    finally:
        env.close()
    assert max_diff < 1e-4, max_diff
    assert agree / total >= 0.98, f"{agree}/{total} actions agree"


def test_onnx_and_torchscript_match_the_bot(run_1v1: Path, bot_1v1: Path, tmp_path: Path) -> None:
    import torch

    pytest.importorskip("onnx")
    onnx_path, ts_path = tmp_path / "policy.onnx", tmp_path / "policy.pt"
    assert main(["export", str(run_1v1), "--onnx", str(onnx_path), "--torchscript", str(ts_path)]) == 0
    side = json.loads((tmp_path / "policy.onnx.json").read_text())
    assert len(side["action_table"]) == 90
    bundle = load_bundle(bot_1v1)
    agent = bundle.agent.SpeedflipAgent(bot_1v1, backend="numpy")
    src = read_source(str(run_1v1))
    recording = record_match(src.checkpoint, src.obs_options, 1, steps=20, arenas=1, seed=2)
    obs = recording.obs.reshape(-1, recording.obs.shape[-1])
    want = agent.logits(obs)
    scripted = torch.jit.load(str(ts_path))
    got_ts = scripted(torch.from_numpy(obs)).detach().numpy()
    np.testing.assert_allclose(got_ts, want, atol=1e-4)
    assert np.array_equal(got_ts.argmax(-1), want.argmax(-1))
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(onnx_path))
    got_onnx = session.run(None, {"obs": obs})[0]
    np.testing.assert_allclose(got_onnx, want, atol=1e-4)


def test_existing_output_is_refused_unless_forced(
    run_1v1: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bot"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert main(["export", str(run_1v1), "--rlbot", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "already exists" in err and "--force" in err and "Traceback" not in err
    assert (out / "keep.txt").read_text() == "mine"
    assert main(["export", str(run_1v1), "--rlbot", str(out), "--force"]) == 0
    assert (out / "bot.toml").is_file() and not (out / "keep.txt").exists()
    onnx_file = tmp_path / "p.onnx"
    onnx_file.write_text("x")
    assert main(["export", str(run_1v1), "--onnx", str(onnx_file)]) == 2
    assert "already exists" in capsys.readouterr().err


def test_checkpoint_of_another_obs_layout_is_refused(
    run_1v1: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    run = tmp_path / "odd"
    shutil.copytree(run_1v1, run)
    checkpoint = next((run / "checkpoints").iterdir())
    meta = json.loads((checkpoint / "meta.json").read_text())
    meta["compat"]["obs_dim"] = 111  # trained with an observation this speedflip no longer builds
    meta[META_CHECKSUM_KEY] = _meta_digest(meta)  # a well-formed checkpoint of another layout, not a damaged one
    (checkpoint / "meta.json").write_text(json.dumps(meta))
    assert main(["export", str(run), "--rlbot", str(tmp_path / "bot")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "observations of 111 floats" in err and "layout changed" in err
    assert not (tmp_path / "bot").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["export", "RUN"], "nothing to export"),
        (["export", "nosuchrun", "--rlbot", "x"], "neither a policy name"),
    ],
)
def test_bad_export_arguments(
    argv: list[str], message: str, run_1v1: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    argv = [str(run_1v1) if a == "RUN" else a for a in argv]
    assert main(argv) == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_onnx_without_the_onnx_package_says_how_to_get_it(
    run_1v1: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import speedflip.export.exporter as exporter

    monkeypatch.setattr(exporter, "onnx_available", lambda: (False, "the onnx package is not installed: pip install x"))
    assert main(["export", str(run_1v1), "--onnx", str(tmp_path / "p.onnx")]) == 2
    assert "--onnx: the onnx package is not installed" in " ".join(capsys.readouterr().err.split())
