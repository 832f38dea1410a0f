"""The ``speedflip`` command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.text import Text

from speedflip import __version__
from speedflip.checkpoint import CheckpointError
from speedflip.config import ConfigError, preset_names
from speedflip.device import DeviceError
from speedflip.doctor import StartupCheckError
from speedflip.env.actions import ActionError
from speedflip.env.sim import SimSetupError
from speedflip.export.errors import ExportError
from speedflip.gym.errors import GymEnvError
from speedflip.selfplay.league import LeagueError
from speedflip.selfplay.userbot import UserBotError
from speedflip.train.rundir import RunDirError
from speedflip.watch.errors import ReplayError

USER_ERRORS = (
    ConfigError, RunDirError, CheckpointError, SimSetupError, ActionError, LeagueError, UserBotError, GymEnvError,
    DeviceError, ReplayError, ExportError, StartupCheckError)  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="speedflip", description="Train Rocket League bots on RocketSim.")
    parser.add_argument("--version", action="version", version=f"speedflip {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train a bot (resumes the run directory if it has checkpoints)")
    train.add_argument("--preset", help=f"a shipped preset: {', '.join(preset_names())} (default: quick)")
    train.add_argument("--config", help="a YAML config file (applied over the preset)")
    train.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override one key, e.g. --set ppo.learning_rate=1e-4 (repeatable)")  # fmt: skip
    train.add_argument(
        "--minutes", type=float, metavar="M",
        help="train for M wall-clock minutes (resumes included), then stop, save and ship the best bot: "
        "the same as --set run.time_budget_minutes=M",
    )  # fmt: skip
    train.add_argument("--run-dir", help="run directory (default: runs/<preset>)")
    train.add_argument("--new", action="store_true", help="start fresh; an existing run is moved aside, not deleted")
    train.add_argument("--resume", metavar="RUN_DIR", help="resume this run directory (same as --run-dir)")
    train.add_argument(
        "--from", dest="from_spec", metavar="SPEC",
        help="start a new run from this policy: a checkpoint or milestone folder, RUN@STEP (a milestone of "
        "RUN), or a run directory (its newest checkpoint); weights and obs normalizer",
    )  # fmt: skip
    train.add_argument(
        "--from-keep-step", action="store_true",
        help="with --from: also take the optimizer state and continue the step counter (and stage)",
    )  # fmt: skip
    train.add_argument(
        "--render", action="store_true", help="stream arena 0 to a running RLViser at real-time speed (rlviser-py)"
    )
    train.add_argument(
        "--env", help="gym:<id> for any registered Gymnasium env (e.g. gym:CartPole-v1), or rocketleague"
    )
    train.add_argument("--algo", choices=("ppo", "ppo_recurrent", "dqn"),
                       help="ppo, ppo_recurrent (LSTM/GRU, recurrent.*) or dqn (Gymnasium envs)")  # fmt: skip

    ev = sub.add_parser(
        "eval", help="evaluate a policy on its env (one argument) or a rated head-to-head match (two players)"
    )
    ev.add_argument(
        "a", help="run dir (its best-rated milestone), RUN@latest, checkpoint folder, or rule / random / idle"
    )
    ev.add_argument("b", nargs="?", help="the opponent, same forms as A (Rocket League; default: rule)")
    ev.add_argument("--episodes", type=int, default=20, help="Gymnasium run: episodes to play (default 20)")
    ev.add_argument(
        "--stochastic",
        action="store_true",
        help="neural players sample their actions (Gymnasium runs and Rocket League matches); "
        "default: their most likely action, as an exported bot plays",
    )
    ev.add_argument("--games", type=int, default=20, help="games, played in parallel arenas (default 20)")
    ev.add_argument("--team-size", type=int, default=1, choices=(1, 2, 3), help="cars per team (default 1)")
    ev.add_argument("--game-seconds", type=float, default=120.0, help="simulated seconds per game (default 120)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument(
        "--deterministic",
        action="store_true",
        help="the default (most likely action); accepted so older commands still work",
    )
    ev.add_argument("--league", help="league.json to update (default: A's run dir, else runs/league.json)")
    ev.add_argument("--json", help="write the match summary to this JSON file")

    lg = sub.add_parser("league", help="print a league's Elo table and write a rating plot")
    lg.add_argument("run", help="a run directory (its league.json) or a league.json path")
    lg.add_argument("--plot", help="PNG path for the Elo plot over steps and minutes (default beside league.json)")
    pick = sub.add_parser(
        "pick",
        help="the final pick on a finished run: its last milestones play longer games against the rule bot and "
        "the idle car, the best becomes the shipped bot (best.json)",
    )
    pick.add_argument("run", help="a run directory with rated milestones")
    pick.add_argument("--milestones", type=int, help="the last N rated milestones (default: the run's setting, else 8)")
    pick.add_argument("--games", type=int, help="games per anchor and milestone, even (default: the run's, 32)")
    pick.add_argument("--game-seconds", type=float, help="simulated seconds per game (default: the run's, 60)")
    pick.add_argument("--seed", type=int, help="the games' seed (default: the run's seed + 7)")
    pick.add_argument(
        "--by",
        choices=["score", "own_goal_veto"],
        help="score: the best score against the rule bot and the idle car ships; own_goal_veto: the shipped bot "
        "stays unless it scores an own goal against the idle car (default: the run's selfplay.final_pick_by)",
    )
    bench = sub.add_parser(
        "bench", help="collection and training throughput vs the physics limit and RLGym's loop (one process)"
    )
    bench.add_argument("--json", metavar="PATH", help="also write the results to this JSON file")
    bench.add_argument("--seconds", type=float, default=5.0, help="seconds per measurement (default 5)")
    bench.add_argument("--arenas", type=int, help="arenas (default: the preset's, 64 for 1v1)")
    bench.add_argument("--preset", default="1v1", help="the config measured (default 1v1)")
    bench.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config key, e.g. --set run.torch_threads=1 (repeatable)")  # fmt: skip
    bench.add_argument("--no-rlgym", action="store_true", help="skip the RLGym v2 baseline")
    bench.add_argument("--collector", choices=("ray",),
                       help="ray: training speed with 1 and 2 Ray actors vs in process, transfer sizes and times, "
                            "the limits of N machines (docs/distributed.md)")  # fmt: skip
    bench.add_argument("--peer", choices=("rlgym-learn",),
                       help="also train this peer on the same match (needs `make peer-venv`)")  # fmt: skip
    bench.add_argument("--peer-venv", metavar="DIR", help="the peer's virtualenv (default: benchmarks/.peer-venv)")
    bench.add_argument("--peer-seconds", type=float, default=150.0,
                       help="wall time of each peer run (default 150)")  # fmt: skip
    bench.add_argument("--peer-procs", type=int, default=4, help="the peer's env processes (default 4)")

    watch = sub.add_parser("watch", help="play a match in RocketSim and write an interactive HTML replay")
    watch.add_argument("a", nargs="?", help="blue: run dir, checkpoint folder, rule / random / idle, or py:FILE:FUNC")
    watch.add_argument("--vs", default="rule", help="orange, same forms as A (default rule)")
    watch.add_argument("--team-size", type=int, default=1, choices=(1, 2, 3), help="cars per team (default 1)")
    watch.add_argument("--seconds", type=float, default=300.0, help="simulated seconds (default 300)")
    watch.add_argument("--out", required=True, help="the HTML page to write (the data goes beside it as .replay.npz)")
    watch.add_argument("--seed", type=int, default=0)
    watch.add_argument("--deterministic", action="store_true", help="neural players take their most likely action")
    watch.add_argument("--from", dest="from_replay", metavar="REPLAY_NPZ",
                       help="rebuild the page from a saved .replay.npz instead of playing")  # fmt: skip
    watch.add_argument("--render", action="store_true", help="also stream the match to RLViser at real-time speed")

    doctor = sub.add_parser("doctor", help="check the install: versions, threads, devices, speed, startup checks")
    doctor.add_argument("--json", metavar="PATH", help="also write the report to this JSON file")
    doctor.add_argument("--seconds", type=float, default=1.0, help="seconds per speed check (default 1)")

    export = sub.add_parser("export", help="export a trained policy: RLBot v5 bot folder, ONNX, TorchScript")
    export.add_argument(
        "run",
        help="a run directory (its best-rated milestone, else its newest good checkpoint), RUN@latest, or a "
        "checkpoint folder",
    )
    export.add_argument("--rlbot", metavar="DIR", help="write a ready RLBot v5 bot folder here")
    export.add_argument("--onnx", metavar="FILE", help="write the policy network as ONNX (needs the onnx package)")
    export.add_argument("--torchscript", metavar="FILE", help="write the policy network as TorchScript")
    export.add_argument("--force", action="store_true", help="replace an existing output folder or file")
    export.add_argument("--name", help="the bot's name in RLBot (default: the run's folder name)")

    components = sub.add_parser(
        "components", help="list rewards, observation builders, actions, state setters and done conditions"
    )
    components.add_argument("--json", action="store_true", help="print JSON instead of tables")
    return parser


def _cmd_train(args: argparse.Namespace, console: Console) -> int:
    from speedflip.gym.cli import resolve_train_config

    if args.config is not None and Path(args.config).is_dir():
        raise ConfigError(f"config file '{args.config}' is a directory; pass a YAML file to --config")
    overrides = list(args.set)
    if args.minutes is not None:
        if not args.minutes > 0:
            raise ConfigError(
                f"--minutes must be a positive number of minutes, got {args.minutes:g}; e.g. --minutes 30"
            )
        overrides.append(f"run.time_budget_minutes={args.minutes!r}")
    cfg, default_dir, notes = resolve_train_config(args.preset, args.config, overrides, args.env, args.algo)
    for note in notes:
        console.print(f"note: {note}", soft_wrap=True)
    run_dir = Path(args.resume or args.run_dir or default_dir)
    start = None
    if args.from_spec is not None:
        from speedflip.train.warmstart import resolve_start

        start = resolve_start(args.from_spec, keep_step=args.from_keep_step)
    elif args.from_keep_step:
        raise ConfigError("--from-keep-step needs --from SPEC (the checkpoint or milestone to start from)")
    if cfg.gym.env_id is not None:
        from speedflip.gym.run import train_gym

        return train_gym(cfg, run_dir, new=args.new, console=console, start=start)
    from speedflip.train.run import train

    return train(cfg, run_dir, new=args.new, console=console, render=args.render, start=start)


def _cmd_eval(args: argparse.Namespace, console: Console) -> int:
    from speedflip.gym.cli import gym_checkpoint
    from speedflip.selfplay.evaluate import run_eval

    if args.stochastic and args.deterministic:
        raise ConfigError(
            "--stochastic and --deterministic contradict each other: give one (deterministic is the default)"
        )
    gym_run = gym_checkpoint(args.a)
    if gym_run is not None:
        if args.b is not None:
            raise ConfigError(f"'{args.a}' is a Gymnasium run: evaluate it alone (speedflip eval {args.a})")
        if args.episodes < 1:
            raise ConfigError(f"--episodes must be at least 1, got {args.episodes}")
        from speedflip.gym.evaluate import run_gym_eval

        return run_gym_eval(args.a, args.episodes, args.stochastic, args.seed, args.json, console)
    if args.b is None:
        console.print(f"one player given: {args.a} plays the rule bot (name a second player to choose)")
        args.b = "rule"
    if args.games < 2:
        raise ConfigError("--games must be at least 2: sides are swapped between the two halves of a match")
    if not args.game_seconds > 0:
        raise ConfigError(f"--game-seconds must be positive, got {args.game_seconds}")
    return run_eval(
        args.a, args.b, args.games, args.team_size, args.game_seconds, args.seed,
        not args.stochastic, args.league, args.json, console,
    )  # fmt: skip


def _cmd_bench(args: argparse.Namespace, console: Console) -> int:
    from speedflip.bench import BenchOptions, print_report, run_bench, write_json

    if args.seconds <= 0:
        raise ConfigError("--seconds must be positive")
    if args.arenas is not None and args.arenas < 1:
        raise ConfigError("--arenas must be at least 1")
    opts = BenchOptions(
        seconds=args.seconds,
        arenas=args.arenas,
        preset=args.preset,
        overrides=args.set,
        rlgym=not args.no_rlgym,
        peer=args.peer,
        peer_venv=args.peer_venv,
        peer_seconds=args.peer_seconds,
        peer_procs=args.peer_procs,
    )
    if args.collector == "ray":
        from speedflip.bench import print_ray_report, run_ray_bench

        results = run_ray_bench(opts, console)
        print_ray_report(results, console)
    else:
        results = run_bench(opts, console)
        print_report(results, console)
    if args.json:
        console.print(f"results written to {write_json(results, args.json)}")
    return 0


def _cmd_league(args: argparse.Namespace, console: Console) -> int:
    from speedflip.selfplay.evaluate import run_league

    return run_league(args.run, args.plot, console)


def _cmd_pick(args: argparse.Namespace, console: Console) -> int:
    from speedflip.selfplay.final_pick import run_pick

    return run_pick(args.run, args.milestones, args.games, args.game_seconds, args.seed, console, by=args.by)


def _cmd_watch(args: argparse.Namespace, console: Console) -> int:
    from speedflip.watch.run import run_watch

    if args.a is None and not args.from_replay:
        raise ReplayError("watch needs a player (a run dir, checkpoint, rule, random or idle) or --from REPLAY")
    return run_watch(
        args.a or "", args.vs, args.team_size, args.seconds, args.out, args.seed, args.deterministic,
        args.from_replay, console, render=args.render,
    )  # fmt: skip


def _cmd_doctor(args: argparse.Namespace, console: Console) -> int:
    from speedflip.doctor import run_doctor

    if not args.seconds > 0:
        raise ConfigError(f"--seconds must be positive, got {args.seconds}")
    return run_doctor(console, seconds=args.seconds, json_path=args.json)


def _cmd_export(args: argparse.Namespace, console: Console) -> int:
    from speedflip.export.exporter import run_export

    return run_export(args.run, args.rlbot, args.onnx, args.torchscript, args.force, args.name, console)


def _cmd_components(args: argparse.Namespace, console: Console) -> int:
    from speedflip.components import list_components, print_components

    data = list_components()
    if args.json:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        print_components(data, console)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace, Console], int]] = {
    "train": _cmd_train, "eval": _cmd_eval, "bench": _cmd_bench, "league": _cmd_league, "watch": _cmd_watch,
    "doctor": _cmd_doctor, "export": _cmd_export, "components": _cmd_components, "pick": _cmd_pick,
}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")
    args = _parser().parse_args(argv)
    console = Console()
    try:
        return COMMANDS[args.command](args, console)
    except USER_ERRORS as err:
        Console(stderr=True).print(Text.assemble(("error: ", "bold red"), str(err)))
        return 2
    except KeyboardInterrupt:  # before training installed its own handler (or after it finished)
        Console(stderr=True).print("interrupted; nothing was left half-written (checkpoints are saved atomically)")
        return 130


if __name__ == "__main__":
    sys.exit(main())
