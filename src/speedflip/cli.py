"""The ``speedflip`` command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

from speedflip import __version__
from speedflip.config import ConfigError, preset_names, resolve_config
from speedflip.env.actions import ActionError
from speedflip.env.sim import SimSetupError
from speedflip.train.checkpoint import CheckpointError
from speedflip.train.rundir import RunDirError

USER_ERRORS = (ConfigError, RunDirError, CheckpointError, SimSetupError, ActionError)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="speedflip", description="Train Rocket League bots on RocketSim.")
    parser.add_argument("--version", action="version", version=f"speedflip {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train a bot (resumes the run directory if it has checkpoints)")
    train.add_argument("--preset", help=f"a shipped preset: {', '.join(preset_names())} (default: quick)")
    train.add_argument("--config", help="a YAML config file (applied over the preset)")
    train.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override one key, e.g. --set ppo.learning_rate=1e-4 (repeatable)")  # fmt: skip
    train.add_argument("--run-dir", help="run directory (default: runs/<preset>)")
    train.add_argument(
        "--new", action="store_true", help="start fresh; an existing run is moved aside, not deleted"
    )
    train.add_argument("--resume", metavar="RUN_DIR", help="resume this run directory (same as --run-dir)")

    return parser


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")
    args = _parser().parse_args(argv)
    console = Console()
    try:
        if args.command == "train":
            from speedflip.train.run import train

            cfg = resolve_config(args.preset, args.config, args.set)
            run_dir = Path(args.resume or args.run_dir or f"runs/{args.preset or 'quick'}")
            return train(cfg, run_dir, new=args.new, console=console)
    except USER_ERRORS as err:
        Console(stderr=True).print(Text.assemble(("error: ", "bold red"), str(err)))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
