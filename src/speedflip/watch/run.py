"""``speedflip watch``: play a match in RocketSim and write an interactive HTML replay.

Also :func:`record_milestone_replay`, the hook a trainer calls after writing a milestone.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console

from speedflip.selfplay.evaluate import BUILTIN, resolve_player, training_obs_options
from speedflip.selfplay.policies import checkpoint_meta, find_checkpoint
from speedflip.watch.errors import ReplayError
from speedflip.watch.live import replay_frames, stream_frames
from speedflip.watch.page import write_page
from speedflip.watch.recorder import Replay, make_recording_env, record_game


def curriculum_padding(spec: str) -> tuple[int, int | None]:
    """``(obs padding, team size)`` a checkpoint was trained at, from its config and curriculum stage.

    A curriculum run pads its observation to the largest stage (the stored ``env.obs_team_size`` may
    be 0); built-in and ``py:`` players adapt to anything: ``(0, None)``.
    """
    if spec in BUILTIN or spec.startswith("py:"):
        return 0, None
    meta = checkpoint_meta(find_checkpoint(spec))
    config = meta.get("config")
    if not isinstance(config, dict):
        return 0, None
    env = config.get("env", {})
    pad = int(env.get("obs_team_size", 0) or 0)
    team = int(env.get("blue_size", 1) or 1)
    curriculum = config.get("curriculum", {})
    if isinstance(curriculum, dict) and curriculum.get("enabled"):
        stages = curriculum.get("stages") or []
        pad = max([pad, *(max(int(s.get("blue_size", 1)), int(s.get("orange_size", 1))) for s in stages)])
        stage = meta.get("stage", 0)
        if isinstance(stage, int) and 0 <= stage < len(stages):
            team = int(stages[stage].get("blue_size", team))
    return pad, team


def watch_match(
    spec_a: str,
    spec_b: str,
    team_size: int,
    seconds: float,
    seed: int = 0,
    deterministic: bool = False,
) -> Replay:
    """A on blue, B on orange, ``seconds`` of simulated time; returns the recorded :class:`Replay`.

    Neural players see the observations they were trained with (builder, padding, frame stack and
    tick skip from their checkpoint) and act with the lookup table they were trained with (the env
    uses A's, or B's when A is built in; a player with another table is decoded with its own, see
    :mod:`speedflip.selfplay.match`); a checkpoint whose observation size does not fit the match is
    a :class:`~speedflip.checkpoint.CheckpointError` that says why.
    """
    if not seconds > 0:
        raise ReplayError(f"--seconds must be positive, got {seconds}")
    if team_size not in (1, 2, 3):
        raise ReplayError(f"--team-size must be 1, 2 or 3, got {team_size}")
    options = dict(training_obs_options(spec_a, spec_b))
    pad = max(curriculum_padding(spec_a)[0], curriculum_padding(spec_b)[0])
    options["obs_team_size"] = max(int(str(options.get("obs_team_size", 0))), pad)
    env = make_recording_env(team_size, seconds, obs_options=options, seed=seed)
    try:
        blue = resolve_player(spec_a, env, seed, deterministic)
        orange = resolve_player(spec_b, env, seed + 1, deterministic)
        extra = {"player_a": spec_a, "player_b": spec_b, "seed": seed, "deterministic": deterministic}
        return record_game(env, blue, orange, seconds, extra_meta=extra)
    finally:
        env.close()


def data_path_for(html_path: Path) -> Path:
    """Where the replay data goes beside a page: ``match.html`` -> ``match.replay.npz``."""
    return html_path.with_name(html_path.stem + ".replay.npz")


def run_watch(
    spec_a: str,
    spec_b: str,
    team_size: int,
    seconds: float,
    out: str,
    seed: int,
    deterministic: bool,
    from_replay: str | None,
    console: Console,
    render: bool = False,
) -> int:
    """The ``watch`` command: record (or load with ``--from``) a replay, write the page and the data file."""
    out_path = Path(out)
    if out_path.suffix.lower() not in (".html", ".htm"):
        raise ReplayError(f"--out must name an .html file, got '{out}'")
    if out_path.is_dir():
        raise ReplayError(f"--out '{out}' is a directory; give a file name such as match.html")
    start = time.perf_counter()
    if from_replay:
        replay = Replay.load(from_replay)
        data_path = None
    else:
        replay = watch_match(spec_a, spec_b, team_size, seconds, seed, deterministic)
        data_path = replay.save(data_path_for(out_path))
    page = write_page(replay, out_path)
    elapsed = time.perf_counter() - start
    goals = replay.meta.get("goals", [int(replay.scores[-1, 0]), int(replay.scores[-1, 1])])
    console.print(
        f"{replay.meta.get('blue_name')} (blue) {goals[0]} - {goals[1]} {replay.meta.get('orange_name')} (orange), "
        f"{replay.seconds:.0f} s, {replay.num_frames} frames, built in {elapsed:.1f} s",
        soft_wrap=True,
    )
    console.print(f"replay page: {page} ({page.stat().st_size / 1024:.0f} KiB, open it in a browser)", soft_wrap=True)
    if data_path is not None:
        console.print(
            f"replay data: {data_path} ({data_path.stat().st_size / 1024:.0f} KiB; rebuild the page with "
            f"`speedflip watch --from {data_path} --out {out}`)",
            soft_wrap=True,
        )
    if render:
        frames = replay_frames(replay.ball, replay.cars, replay.boost, replay.flags, replay.pads)
        teams = replay.meta.get("car_teams", [])
        sent = stream_frames(
            frames, teams, replay.meta.get("pad_positions", []), int(replay.meta.get("tick_skip", 8)),
            say=lambda text: console.print(text, soft_wrap=True),
        )  # fmt: skip
        if sent:
            console.print(f"--render: {sent} frames sent to RLViser")
    return 0


def record_milestone_replay(
    checkpoint: Path,
    out_dir: Path,
    seconds: float = 30.0,
    opponent: str = "rule",
    seed: int = 0,
) -> tuple[Path, Path]:
    """Record a short replay of a milestone (blue) against ``opponent``; returns ``(page, data)`` paths.

    The hook for training: call it with the folder :meth:`Trainer.milestone` returned and
    ``run_dir / "replays"``. It plays ``seconds`` (default 30) of simulated time at the team size the
    checkpoint was trained at (about half a second of CPU for 30 s in 1v1) and writes
    ``<out_dir>/<stage>-<step>.html`` and ``.replay.npz``. It raises the usual user errors
    (:class:`~speedflip.checkpoint.CheckpointError`, :class:`ReplayError`, ``OSError``); a trainer
    should catch them and carry on.
    """
    team = curriculum_padding(str(checkpoint))[1] or 1
    replay = watch_match(str(checkpoint), opponent, team, seconds, seed=seed, deterministic=False)
    meta: dict[str, Any] = checkpoint_meta(Path(checkpoint))
    stage = str(meta.get("stage_name") or meta.get("phase") or "main")
    step = int(meta.get("global_step", 0) or 0)
    page = Path(out_dir) / f"{stage}-{step}.html"
    data = replay.save(data_path_for(page))
    write_page(replay, page)
    return page, data
