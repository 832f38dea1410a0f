"""train/run.py: the start-up summary's kickstart line, written out by hand."""

from __future__ import annotations

from speedflip.config import build_config
from speedflip.train.run import describe_kickstart


def test_the_start_up_summary_names_the_kickstart() -> None:
    constant = build_config({"ppo": {"kickstart_coef": 1.0}})
    assert describe_kickstart(constant) == "toward the rule bot's action, weight 1, all run long"
    decaying = build_config({"ppo": {"kickstart_coef": 0.5, "kickstart_steps": 10_000_000}})
    assert describe_kickstart(decaying) == (
        "toward the rule bot's action, weight 0.5, falling to 0 at 10,000,000 agent steps"
    )
    released = build_config({"ppo": {"kickstart_coef": 0.5, "kickstart_steps": 5_000_000, "release_kl_coef": 0.5}})
    assert describe_kickstart(released) == (
        "toward the rule bot's action, weight 0.5, falling to 0 at 5,000,000 agent steps; then KL toward the "
        "policy as it was then, weight 0.5"
    )
