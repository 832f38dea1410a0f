"""Average the weights of a finished run's last N milestones into a one-milestone run to evaluate.

A question for the shipped bot, asked offline: self-play moves the policy from milestone to milestone
(neighbouring milestones of one run differ by up to 0.5 in win rate against one opponent), and in
fictitious play it is the *average* strategy, not the current one, that approaches a best response. Is
the uniform weight average of the last N milestones (policy and critic; the observation normaliser and
everything else from the newest) a better bot than those milestones are on average? This script writes
the averaged checkpoint as ``OUT/milestones/main/<newest step>/`` (a verified checkpoint folder like any
milestone), so ``benchmarks/milestone_curve.py OUT --last 1`` and ``speedflip eval OUT/milestones/main/STEP``
play it the same way as the milestones it was made from (docs/learning.md, ninth session: it was not).

    python benchmarks/average_milestones.py RUN --last 4 --out /tmp/avg4-RUN
    python benchmarks/milestone_curve.py /tmp/avg4-RUN --last 1 --games 40 --out avg.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from speedflip.checkpoint import Checkpoint, list_checkpoints, load_checkpoint, save_checkpoint


def average_checkpoints(checkpoints: list[Checkpoint], names: list[str]) -> Checkpoint:
    """The first checkpoint with its model tensors replaced by the mean over ``checkpoints``.

    Every checkpoint must hold the same model tensors (one run: the same network); ``names`` (the
    milestones' folder names) are recorded in the meta as ``averaged_from``.
    """
    if not checkpoints:
        raise ValueError("no checkpoints to average")
    newest = checkpoints[0]
    for name, ckpt in zip(names, checkpoints, strict=True):
        if ckpt.model.keys() != newest.model.keys() or any(
            ckpt.model[k].shape != newest.model[k].shape for k in newest.model
        ):
            raise ValueError(f"milestone {name} holds another network than milestone {names[0]}; average one run only")
    model = {
        key: torch.stack([c.model[key].double() for c in checkpoints]).mean(0).to(value.dtype)
        for key, value in newest.model.items()
    }
    meta = {**newest.meta, "averaged_from": list(names)}  # save_checkpoint writes its step, time and checksums anew
    return Checkpoint(model, newest.optimizer_tensors, newest.optimizer_meta, newest.state_tensors, meta)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a finished run directory (milestones/<stage>/)")
    parser.add_argument("--last", type=int, default=4, help="how many of the newest milestones to average")
    parser.add_argument("--stage", default="main")
    parser.add_argument("--out", type=Path, required=True, help="the one-milestone run directory to write")
    args = parser.parse_args()
    stage_dir = args.run / "milestones" / args.stage
    folders = list_checkpoints(stage_dir)[: args.last]  # newest first
    if len(folders) < args.last:
        raise SystemExit(f"'{args.run}' has {len(folders)} milestones in {stage_dir}/, fewer than --last {args.last}")
    averaged = average_checkpoints([load_checkpoint(f) for f in folders], [f.name for f in folders])
    path = save_checkpoint(args.out / "milestones" / "main", int(folders[0].name), averaged, keep=1)
    print(f"{path}: the average of milestones {', '.join(f.name for f in folders)}")


if __name__ == "__main__":
    main()
