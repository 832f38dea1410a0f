"""train/run.py: the start-up summary's kickstart and opponents lines, written out by hand."""

from __future__ import annotations

from speedflip.config import build_config
from speedflip.train.run import describe_kickstart, describe_opponents


def test_the_start_up_summary_names_the_kickstart() -> None:
    constant = build_config({"ppo": {"kickstart_coef": 1.0}})
    assert describe_kickstart(constant) == "toward the rule bot's action, weight 1, all run long"
    decaying = build_config({"ppo": {"kickstart_coef": 0.5, "kickstart_steps": 10_000_000}})
    assert describe_kickstart(decaying) == (
        "toward the rule bot's action, weight 0.5, falling to 0 at 10,000,000 agent steps"
    )
    ppo = {"kickstart_coef": 0.5, "kickstart_steps": 5_000_000, "kickstart_fraction": 0.4}
    by_the_clock = build_config({"ppo": ppo})
    assert describe_kickstart(by_the_clock) == (
        "toward the rule bot's action, weight 0.5, falling to 0 at 5,000,000 agent steps or 40 % of the run, "
        "whichever comes first"
    )
    fraction = build_config({"ppo": {"kickstart_coef": 1.0, "kickstart_fraction": 0.25}})
    assert describe_kickstart(fraction) == "toward the rule bot's action, weight 1, falling to 0 at 25 % of the run"
    released = build_config({"ppo": {"kickstart_coef": 0.5, "kickstart_steps": 5_000_000, "release_kl_coef": 0.5}})
    assert describe_kickstart(released) == (
        "toward the rule bot's action, weight 0.5, falling to 0 at 5,000,000 agent steps; then KL toward the "
        "policy as it was then, weight 0.5"
    )


def test_the_start_up_summary_names_the_opponents() -> None:
    def line(selfplay: dict[str, object], curriculum: bool = False) -> str:
        return describe_opponents(build_config({"selfplay": selfplay, "curriculum": {"enabled": curriculum}}))

    assert line({}) == "self-play in every arena"
    assert line({}, curriculum=True) == (
        "self-play in every arena (the curriculum's stages set their own share of arenas)"
    )
    assert line({"opponent_share": 0.25}) == (
        "a pool in 25 % of arenas: milestones and the rule bot (elo_weighted); self-play in the others"
    )
    assert line({"opponent_share": 0.625, "rule_share": 0.8, "idle_share": 0.2}) == (
        "a pool in 62.5 % of arenas: rule bot 80 %, idle car 20 %; self-play in the others"
    )
    assert line({"opponent_share": 0.5, "idle_share": 0.1, "include_rule": False, "sampling": "uniform"}) == (
        "a pool in 50 % of arenas: idle car 10 %, milestones (uniform) the rest; self-play in the others"
    )
