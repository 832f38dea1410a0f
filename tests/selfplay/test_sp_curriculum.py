"""Curriculum stages: padded observations, advancing on global_step, restoring the stage from a checkpoint."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sp_helpers import tiny_config, tiny_data

from speedflip.config import ConfigError, build_config
from speedflip.env.obs import DefaultObs
from speedflip.train.trainer import Trainer, stage_config

# stage 0: 2 arenas x 2 cars x 8 steps = 32 agent steps per rollout -> advance at 32
# stage 1 (1v2, no pool): 2 arenas x 3 cars x 8 = 48 per rollout -> global 80 >= 64 -> advance
STAGES: list[dict[str, Any]] = [
    {"name": "1v1", "blue_size": 1, "orange_size": 1, "until_steps": 32},
    {"name": "1v2", "blue_size": 1, "orange_size": 2, "until_steps": 64},
    {"name": "2v2", "blue_size": 2, "orange_size": 2},
]


def _cfg(stages: list[dict[str, Any]] = STAGES) -> Any:
    return tiny_config(curriculum={"enabled": True, "stages": stages})


@pytest.fixture
def trainer() -> Iterator[Trainer]:
    t = Trainer(_cfg())
    yield t
    t.close()


def test_stage_config_pads_obs_to_the_largest_stage() -> None:
    cfg = _cfg()
    dims = set()
    for i, (blue, orange) in enumerate([(1, 1), (1, 2), (2, 2)]):
        env = stage_config(cfg, i).env
        assert (env.blue_size, env.orange_size) == (blue, orange)
        assert env.obs_team_size == 2  # max(1, 2, 2) over the stages
        dims.add(DefaultObs(env.blue_size, env.orange_size, env.obs_team_size).obs_dim)
    assert len(dims) == 1  # one observation size in every stage
    # without padding the sizes would differ, so the padding is what makes them equal
    assert DefaultObs(1, 1).obs_dim != DefaultObs(2, 2).obs_dim
    # an explicit larger obs_team_size wins
    cfg3 = tiny_config(env={"obs_team_size": 3}, curriculum={"enabled": True, "stages": STAGES})
    assert stage_config(cfg3, 0).env.obs_team_size == 3
    # the config itself is not changed, and a disabled curriculum is a no-op
    assert cfg.env.obs_team_size == 0 and cfg.env.blue_size == 1
    plain = tiny_config()
    assert stage_config(plain, 0) is plain


def test_trainer_advances_through_the_stages(trainer: Trainer) -> None:
    t = trainer
    obs_dim = t.env.obs_dim
    assert (t.stage, t.stage_name, t.env.num_cars) == (0, "1v1", 2)
    assert t.advance_curriculum() is None  # step 0 < 32

    batch, raw, _ = t.collect()
    t.update(batch, raw)
    assert t.global_step == 32
    message = t.advance_curriculum()
    assert message is not None and "'1v1' -> '1v2'" in message and "32" in message
    assert (t.stage, t.stage_name) == (1, "1v2")
    assert (t.env_cfg.env.blue_size, t.env_cfg.env.orange_size, t.env.num_cars) == (1, 2, 3)
    assert t.env.obs_dim == obs_dim == t.model.obs_dim
    assert t.advance_curriculum() is None  # 32 < 64

    batch, raw, _ = t.collect()  # the same network acts on the 1v2 observations
    t.update(batch, raw)
    assert t.global_step == 32 + 48
    message = t.advance_curriculum()
    assert message is not None and "'1v2' -> '2v2'" in message
    assert (t.stage, t.env.num_cars, t.env.obs_dim) == (2, 4, obs_dim)
    batch, raw, _ = t.collect()
    assert t.global_step == 80 + 2 * 4 * 8
    assert t.advance_curriculum() is None  # the last stage never advances


def test_pool_stage_trains_only_the_learner_rows() -> None:
    """A 1v2 stage against the pool (the default curriculum's middle stage): opponents are the rule bot."""
    stages = [
        {"name": "1v1", "until_steps": 32},
        {"name": "1v2", "blue_size": 1, "orange_size": 2, "opponent_share": 1.0, "until_steps": 1000},
        {"name": "2v2", "blue_size": 2, "orange_size": 2},
    ]
    t = Trainer(_cfg(stages))
    try:
        assert t.matchmaker.pool_arenas == 0 and len(t.matchmaker.learner_cols) == 4  # stage 0 is self-play
        batch, raw, _ = t.collect()
        t.update(batch, raw)
        assert t.advance_curriculum() is not None
        # round(1.0 * 2) = 2 pool arenas: arena 0 learner blue (1 car), arena 1 learner orange (2 cars)
        assert t.matchmaker.pool_arenas == 2
        assert t.matchmaker.learner_cols.tolist() == [0, 4, 5]
        assert [m.name for m in t.matchmaker.members] == ["rule"]
        batch, raw, _ = t.collect()
        assert t.global_step == 32 + 3 * 8  # only the learner's 3 agents count
        assert batch.obs.shape == (3 * 8, t.env.obs_dim)
    finally:
        t.close()


def test_checkpoint_restores_the_stage(tmp_path: Path, trainer: Trainer) -> None:
    batch, raw, _ = trainer.collect()
    trainer.update(batch, raw)
    assert trainer.advance_curriculum() is not None
    path = trainer.save(tmp_path / "checkpoints")
    assert trainer.stage == 1

    fresh = Trainer(_cfg())
    try:
        assert fresh.stage == 0 and fresh.env.num_cars == 2
        fresh.load(path)
        assert (fresh.stage, fresh.stage_name, fresh.global_step) == (1, "1v2", 32)
        assert (fresh.env_cfg.env.blue_size, fresh.env_cfg.env.orange_size, fresh.env.num_cars) == (1, 2, 3)
        for key, value in trainer.model.state_dict().items():
            assert fresh.model.state_dict()[key].equal(value), key
        batch, raw, _ = fresh.collect()  # and it trains on from there
        assert fresh.global_step == 32 + 48
    finally:
        fresh.close()


def test_stage_conditions_are_validated() -> None:
    no_condition = [{"name": "a"}, {"name": "b"}]
    with pytest.raises(ConfigError, match="stage 'a' is not the last one"):
        build_config(tiny_data(curriculum={"enabled": True, "stages": no_condition}))
    decreasing = [{"name": "a", "until_steps": 200}, {"name": "b", "until_steps": 100}, {"name": "c"}]
    with pytest.raises(ConfigError, match="until_steps must increase"):
        build_config(tiny_data(curriculum={"enabled": True, "stages": decreasing}))
    with pytest.raises(ConfigError, match="at least one stage"):
        build_config(tiny_data(curriculum={"enabled": True, "stages": []}))
    # the last stage needs no condition; a win-rate or Elo condition is enough for the others
    ok = [{"name": "a", "until_win_rate": 0.6}, {"name": "b", "until_elo": 1200}, {"name": "c"}]
    cfg = build_config(tiny_data(curriculum={"enabled": True, "stages": ok}))
    assert [s.name for s in cfg.curriculum.stages] == ["a", "b", "c"]
