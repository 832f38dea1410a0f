"""Peer benchmark: rlgym-learn + rlgym-learn-algos PPO on the same match, overall agent steps/s.

rlgym-learn (https://pypi.org/project/rlgym-learn/) is the RLGym project's own trainer: RLGym v2
envs in worker processes (one env per process, Rust shared-memory IPC) and a PPO agent controller
from rlgym-learn-algos. This script trains it for a fixed wall time on the match ``speedflip bench``
uses for its RLGym peer: 1v1 (or ``--team-size``), tick skip 8, kickoffs, RLGym ``DefaultObs``,
``LookupTableAction``, goal + touch rewards, goal / no-touch / timeout conditions, with speedflip's
network (policy and critic layers), batch (agent steps per iteration), minibatch, epochs, learning
rate and entropy coefficient, and reports rlgym-learn's own "Overall Steps per Second" (agent steps
collected per iteration / iteration wall time, collection + PPO update), averaged over the
iterations after the first (the first includes starting the processes).

It is *not* a dependency of speedflip: it runs in its own virtualenv (``make peer-venv`` creates
``benchmarks/.peer-venv``), with the versions that run here::

    python3 -m venv benchmarks/.peer-venv
    benchmarks/.peer-venv/bin/pip install torch==2.13.0
    benchmarks/.peer-venv/bin/pip install rlgym-learn==1.0.5 rlgym-learn-algos==0.2.6 "rlgym[rl-sim]" wandb

(rlgym-learn 2.0.0 + rlgym-learn-algos 0.4.2 stall in their shared-memory IPC on the 2-core machine
this was written on; 1.0.5 + 0.2.6 run. rlgym-learn-algos imports wandb, which is not used.)

Two roles in one file:

- driver (any Python 3.10+, e.g. the project's): ``python benchmarks/peer_rlgym_learn.py --venv
  benchmarks/.peer-venv --seconds 240`` starts the child in the peer venv, stops it after the wall
  time, parses its per-iteration lines and prints one JSON object (``--json`` writes it too).
  ``speedflip bench --peer rlgym-learn`` runs this driver.
- child (``--child``, inside the peer venv): the rlgym-learn run itself. rlgym-learn polls the
  keyboard through a terminal (KBHit); without a TTY that fails, so it is replaced by a stand-in
  that presses "q" (save and quit) when the wall time is up.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

ITER_TAG = "PEER_ITER "
DEFAULT_VENV = Path(__file__).resolve().parent / ".peer-venv"
VENV_HELP = (
    "create it with `make peer-venv` (or: python3 -m venv {venv} && {venv}/bin/pip install torch==2.13.0 && "
    '{venv}/bin/pip install rlgym-learn==1.0.5 rlgym-learn-algos==0.2.6 "rlgym[rl-sim]" wandb)'
)


# ---------------------------------------------------------------------- child: the rlgym-learn run


def build_env(spec: dict[str, Any]) -> Any:  # pragma: no cover - runs in the peer venv's env processes
    """The RLGym v2 env of ``spec`` (module level: rlgym-learn pickles it into its env processes)."""
    from rlgym.api import RLGym
    from rlgym.rocket_league.action_parsers import LookupTableAction, RepeatAction
    from rlgym.rocket_league.done_conditions import (
        AnyCondition,
        GoalCondition,
        NoTouchTimeoutCondition,
        TimeoutCondition,
    )
    from rlgym.rocket_league.obs_builders import DefaultObs
    from rlgym.rocket_league.reward_functions import CombinedReward, GoalReward, TouchReward
    from rlgym.rocket_league.sim import RocketSimEngine
    from rlgym.rocket_league.state_mutators import FixedTeamSizeMutator, KickoffMutator, MutatorSequence

    team = int(spec["team_size"])
    return RLGym(
        state_mutator=MutatorSequence(FixedTeamSizeMutator(blue_size=team, orange_size=team), KickoffMutator()),
        obs_builder=DefaultObs(zero_padding=None),
        action_parser=RepeatAction(LookupTableAction(), repeats=int(spec["tick_skip"])),
        reward_fn=CombinedReward(
            (GoalReward(), float(spec["goal_reward"])), (TouchReward(), float(spec["touch_reward"]))
        ),
        termination_cond=GoalCondition(),
        truncation_cond=AnyCondition(
            NoTouchTimeoutCondition(float(spec["no_touch_timeout_seconds"])),
            TimeoutCondition(float(spec["timeout_seconds"])),
        ),
        transition_engine=RocketSimEngine(),
    )


def _child(spec: dict[str, Any]) -> None:  # pragma: no cover - runs in the peer venv
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import numpy as np
    import rlgym_learn.learning_coordinator as lc
    import torch
    from rlgym_learn import (
        BaseConfigModel,
        LearningCoordinator,
        LearningCoordinatorConfigModel,
        ProcessConfigModel,
        PyAnySerdeType,
        SerdeTypesModel,
    )
    from rlgym_learn_algos.logging import DictMetricsLogger
    from rlgym_learn_algos.ppo import (
        BasicCritic,
        DiscreteFF,
        ExperienceBufferConfigModel,
        GAETrajectoryProcessor,
        GAETrajectoryProcessorConfigModel,
        NumpyExperienceBuffer,
        PPOAgentController,
        PPOAgentControllerConfigModel,
        PPOLearnerConfigModel,
    )

    if spec.get("torch_threads"):
        torch.set_num_threads(int(spec["torch_threads"]))
    deadline = time.monotonic() + float(spec["seconds"])

    class DeadlineKeyboard:
        """Stands in for rlgym-learn's terminal keyboard poller: "q" once the wall time is up."""

        def kbhit(self) -> bool:
            return time.monotonic() >= deadline

        def getch(self) -> str:
            return "q"

        def set_normal_term(self) -> None:
            pass

    lc.KBHit = DeadlineKeyboard  # type: ignore[attr-defined]

    class IterationLogger(DictMetricsLogger):  # type: ignore[misc,type-arg]
        """One JSON line per PPO iteration with rlgym-learn's own timing figures."""

        def __init__(self) -> None:
            self.metrics: dict[str, Any] = {}

        def collect_agent_metrics(self, data: Any) -> None:
            self.metrics = {
                "timesteps": data.timesteps_collected,
                "iteration_s": data.iteration_time,
                "collection_s": data.timestep_collection_time,
                "learn_s": data.ppo_data.batch_consumption_time,
                "cumulative_timesteps": data.cumulative_timesteps,
                "overall_sps": data.timesteps_collected / data.iteration_time,
                "collected_sps": data.timesteps_collected / data.timestep_collection_time,
                "average_reward": float(data.trajectory_processor_data.average_reward),
                "entropy": float(data.ppo_data.actor_entropy),
            }

        def get_metrics(self) -> dict[str, Any]:
            return self.metrics

        def report_metrics(self) -> None:
            print(ITER_TAG + json.dumps(self.metrics, default=float), flush=True)

        def validate_config(self, config_obj: Any) -> None:
            return None

    policy_layers = tuple(int(x) for x in spec["policy_layers"])
    critic_layers = tuple(int(x) for x in spec["critic_layers"])

    def actor_factory(obs_space: Any, action_space: Any, device: Any) -> Any:
        return DiscreteFF(obs_space[1], action_space[1], policy_layers, device)

    def critic_factory(obs_space: Any, device: Any) -> Any:
        return BasicCritic(obs_space[1], critic_layers, device)

    batch = int(spec["batch_size"])
    config = LearningCoordinatorConfigModel(
        base_config=BaseConfigModel(
            serde_types=SerdeTypesModel(
                agent_id_serde_type=PyAnySerdeType.STRING(),
                action_serde_type=PyAnySerdeType.NUMPY(np.int64),
                obs_serde_type=PyAnySerdeType.NUMPY(np.float64),
                reward_serde_type=PyAnySerdeType.FLOAT(),
                obs_space_serde_type=PyAnySerdeType.TUPLE((PyAnySerdeType.STRING(), PyAnySerdeType.INT())),
                action_space_serde_type=PyAnySerdeType.TUPLE((PyAnySerdeType.STRING(), PyAnySerdeType.INT())),
            ),
            timestep_limit=10**12,  # the wall time ends the run
            random_seed=int(spec["seed"]),
        ),
        process_config=ProcessConfigModel(n_proc=int(spec["n_proc"])),
        agent_controllers_config={
            "PPO1": PPOAgentControllerConfigModel(
                timesteps_per_iteration=batch,
                save_every_ts=10**12,
                learner_config=PPOLearnerConfigModel(
                    device="cpu",
                    n_epochs=int(spec["epochs"]),
                    batch_size=int(spec["minibatch_size"]),  # samples per optimiser step
                    n_minibatches=1,
                    ent_coef=float(spec["ent_coef"]),
                    actor_lr=float(spec["learning_rate"]),
                    critic_lr=float(spec["learning_rate"]),
                ),
                experience_buffer_config=ExperienceBufferConfigModel(
                    max_size=batch,  # on-policy: learn from this iteration's batch only, like speedflip
                    device="cpu",
                    trajectory_processor_config=GAETrajectoryProcessorConfigModel(),
                ),
            )
        },
        agent_controllers_save_folder=str(Path(spec["workdir"]) / "checkpoints"),
    )
    coordinator = LearningCoordinator(
        partial(build_env, spec),
        agent_controllers={
            "PPO1": PPOAgentController(
                actor_factory=actor_factory,
                critic_factory=critic_factory,
                experience_buffer=NumpyExperienceBuffer(GAETrajectoryProcessor()),
                metrics_logger=IterationLogger(),
                obs_standardizer=None,
            )
        },
        config=config,
    )
    print(f"PEER_START torch threads {torch.get_num_threads()}", flush=True)
    coordinator.start()


# ---------------------------------------------------------------------- driver


def _busy_ticks() -> int | None:
    """Busy CPU ticks of the whole machine (Linux /proc/stat), else None."""
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    return user + nice + system + irq + softirq + steal


def _tree_ticks(pid: int) -> int:
    """utime + stime of ``pid`` and all its descendants (Linux /proc), in clock ticks."""
    parents: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry))
        ticks[int(entry)] = int(fields[11]) + int(fields[12])
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += ticks.get(p, 0)
        todo += parents.get(p, [])
    return total


def summarise(iterations: list[dict[str, Any]], skip_first: int = 1) -> dict[str, Any]:
    """Overall and collection agent steps/s over the iterations after the first ``skip_first``."""
    used = iterations[skip_first:] if len(iterations) > skip_first else []
    steps = sum(int(it["timesteps"]) for it in used)
    seconds = sum(float(it["iteration_s"]) for it in used)
    collect_s = sum(float(it["collection_s"]) for it in used)
    return {
        "iterations": len(iterations),
        "iterations_used": len(used),
        "agent_steps_used": steps,
        "overall_agent_sps": steps / seconds if seconds > 0 else None,
        "collect_agent_sps": steps / collect_s if collect_s > 0 else None,
        "learn_share": 1 - collect_s / seconds if seconds > 0 else None,
    }


def venv_python(venv: str | Path) -> Path:
    return Path(venv) / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def run_peer(spec: dict[str, Any], venv: str | Path, grace: float = 120.0, log: Path | None = None) -> dict[str, Any]:
    """Run the rlgym-learn child in ``venv`` for ``spec['seconds']`` and return its figures.

    Raises FileNotFoundError (with how to create it) if the venv's python is missing.
    """
    python = venv_python(venv)
    if not python.exists():
        raise FileNotFoundError(f"no peer virtualenv at {venv}: " + VENV_HELP.format(venv=venv))
    workdir = Path(tempfile.mkdtemp(prefix="speedflip-peer-"))
    spec = {**spec, "workdir": str(workdir)}
    cmd = [str(python), str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    iterations: list[dict[str, Any]] = []
    loads: list[tuple[float, int | None, int]] = []  # at the end of each iteration: time, busy ticks, own ticks
    lines: list[str] = []
    started = time.monotonic()
    timed_out = False
    try:
        proc = subprocess.Popen(
            cmd, cwd=workdir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        hard_deadline = started + float(spec["seconds"]) + grace
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        while True:
            if time.monotonic() > hard_deadline:
                timed_out = True
                break
            if not sel.select(timeout=1.0):
                if proc.poll() is not None:
                    break
                continue
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if line.startswith(ITER_TAG):
                iterations.append(json.loads(line[len(ITER_TAG) :]))
                loads.append((time.monotonic(), _busy_ticks(), _tree_ticks(proc.pid)))
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if log is not None:
        log.write_text("\n".join(lines) + "\n")
    other_cores = None
    if len(loads) >= 2 and loads[0][1] is not None and loads[-1][1] is not None:
        (t0, b0, o0), (t1, b1, o1) = loads[0], loads[-1]
        clock = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        other_cores = max(0.0, (b1 - b0) - (o1 - o0)) / clock / (t1 - t0)  # type: ignore[operator]
    result: dict[str, Any] = {
        "peer": "rlgym-learn",
        "spec": {k: v for k, v in spec.items() if k != "workdir"},
        "wall_seconds": time.monotonic() - started,
        "exit_code": proc.returncode,
        "timed_out": timed_out,
        "versions": _versions(python),
        **summarise(iterations),
        "other_load_cores": other_cores,
        "per_iteration_overall_sps": [round(float(it["overall_sps"]), 1) for it in iterations],
    }
    if not iterations:
        result["error"] = "no PPO iteration finished; last output:\n" + "\n".join(lines[-15:])
    return result


def _versions(python: Path) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, platform; "
        "print(json.dumps({p: m.version(p) for p in ('rlgym-learn','rlgym-learn-algos','rlgym','rocketsim','torch')}"
        " | {'python': platform.python_version()}))"
    )
    try:
        out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60, check=True)
        return dict(json.loads(out.stdout))
    except (subprocess.SubprocessError, ValueError, OSError):
        return {}


def default_spec(seconds: float = 240.0) -> dict[str, Any]:
    """The speedflip ``1v1`` preset's network and batch with the goal + touch rewards."""
    return {
        "seconds": seconds,
        "team_size": 1,
        "tick_skip": 8,
        "timeout_seconds": 300.0,
        "no_touch_timeout_seconds": 30.0,
        "goal_reward": 10.0,
        "touch_reward": 0.5,
        "policy_layers": [256, 256, 256],
        "critic_layers": [256, 256, 256],
        "batch_size": 32768,
        "minibatch_size": 8192,
        "epochs": 3,
        "learning_rate": 2e-4,
        "ent_coef": 0.01,
        "n_proc": 4,
        "torch_threads": None,
        "seed": 0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", metavar="SPEC_JSON", help=argparse.SUPPRESS)
    ap.add_argument("--venv", default=os.environ.get("SPEEDFLIP_PEER_VENV", str(DEFAULT_VENV)),
                    help="the peer virtualenv (default $SPEEDFLIP_PEER_VENV or benchmarks/.peer-venv)")  # fmt: skip
    ap.add_argument("--seconds", type=float, default=240.0, help="wall time of the run (default 240)")
    ap.add_argument("--n-proc", type=int, default=4, help="rlgym-learn env processes (one env each; default 4)")
    ap.add_argument("--team-size", type=int, default=1)
    ap.add_argument("--layers", default="256,256,256", help="policy and critic hidden layers")
    ap.add_argument("--batch", type=int, default=32768, help="agent steps per PPO iteration")
    ap.add_argument("--minibatch", type=int, default=8192, help="samples per optimiser step")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--torch-threads", type=int, default=None)
    ap.add_argument("--json", default=None, help="also write the result here")
    ap.add_argument("--log", default=None, help="write the child's output here")
    args = ap.parse_args(argv)
    if args.child is not None:
        _child(json.loads(args.child))
        return 0
    spec = default_spec(args.seconds)
    layers = [int(x) for x in args.layers.split(",")]
    spec.update(n_proc=args.n_proc, team_size=args.team_size, policy_layers=layers, critic_layers=layers,
                batch_size=args.batch, minibatch_size=args.minibatch, epochs=args.epochs,
                torch_threads=args.torch_threads)  # fmt: skip
    try:
        result = run_peer(spec, args.venv, log=Path(args.log) if args.log else None)
    except FileNotFoundError as e:
        print(str(e), file=sys.stderr)
        return 2
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0 if result.get("overall_agent_sps") else 1


if __name__ == "__main__":
    raise SystemExit(main())
