"""Re-rate a finished run's milestones with other rating settings and name the milestone they would ship.

The shipped bot (``best.json``) is the best-rated milestone; each milestone is rated as training goes in
``selfplay.rating_games`` games of ``selfplay.rating_game_seconds`` against the rule bot, the idle car and
earlier milestones (``speedflip.selfplay.rating``). This script replays that selection offline, in step
order, with a fresh league and the settings given, so the pick of more (or longer) rating games can be
compared with the run's own pick without training again. It prints one line per milestone and the pick
as JSON; evaluate the pick with ``speedflip eval``.

    python benchmarks/rerate.py RUN --set selfplay.rating_games=16 --set selfplay.rating_game_seconds=60
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from speedflip.checkpoint import list_checkpoints
from speedflip.config import apply_overrides, build_config, load_file
from speedflip.selfplay.league import League
from speedflip.selfplay.rating import rate_milestone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a finished run directory (config.yaml, milestones/)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="selfplay.* overrides")
    parser.add_argument("--stage", default="main", help="milestones/<stage>/ to rate (default main)")
    parser.add_argument("--seed", type=int, default=1000, help="match seed (the k-th milestone plays seed + k)")
    args = parser.parse_args()

    config_file, stage_dir = args.run / "config.yaml", args.run / "milestones" / args.stage
    if not config_file.is_file() or not stage_dir.is_dir():
        raise SystemExit(f"'{args.run}' is not a finished run with milestones: it needs {config_file} and {stage_dir}/")
    cfg = build_config(apply_overrides(load_file(config_file), args.set), str(config_file))
    folders = list_checkpoints(stage_dir)[::-1]  # milestones are checkpoint folders; oldest first
    best: tuple[float, str, Path] | None = None
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        league = League.load(Path(tmp) / "league.json")
        for k, folder in enumerate(folders):
            rated = rate_milestone(folder, league, cfg.env, cfg.selfplay, args.seed + k)
            print(rated.describe(), flush=True)
            if best is None or rated.rating > best[0]:
                best = (rated.rating, rated.name, folder)
    if best is None:
        raise SystemExit(f"no milestones in {stage_dir}")
    print(json.dumps({"run": str(args.run), "overrides": args.set, "pick": best[1], "elo": round(best[0], 1),
                      "path": str(best[2]), "milestones": len(folders),
                      "seconds": round(time.perf_counter() - start, 1)}))  # fmt: skip


if __name__ == "__main__":
    main()
