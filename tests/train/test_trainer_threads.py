"""The PPO update runs with run.update_torch_threads; collection keeps run.torch_threads."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from sf_helpers import tiny_config

from speedflip.device import torch_threads
from speedflip.train.trainer import Trainer


def test_torch_threads_sets_and_restores() -> None:
    before = torch.get_num_threads()
    with torch_threads(before + 1):
        assert torch.get_num_threads() == before + 1
    assert torch.get_num_threads() == before


@pytest.mark.parametrize(("overlap", "expected"), [(False, 2), (True, 1)])
def test_update_uses_its_own_thread_count(overlap: bool, expected: int) -> None:
    trainer = Trainer(tiny_config(run={"torch_threads": 1, "update_torch_threads": 2, "overlap_collection": overlap}))
    seen: list[int] = []
    update = trainer.learner.update

    def spy(*args: Any, **kwargs: Any) -> dict[str, float]:
        seen.append(torch.get_num_threads())
        return update(*args, **kwargs)

    trainer.learner.update = spy  # type: ignore[method-assign]
    try:
        batch, raw_obs, _ = trainer.collect()
        assert torch.get_num_threads() == 1  # collection: run.torch_threads
        trainer.update(batch, raw_obs)
        trainer.finish_pending_update()
        assert seen == [expected]  # overlap: the update shares the machine with collection, so no change
        assert torch.get_num_threads() == 1
    finally:
        trainer.close()


def test_the_update_anneals_over_the_time_budget() -> None:
    """ppo.anneal_lr with run.time_budget_minutes: the update's rate follows the run's clock (train_clock)."""
    cfg = tiny_config(
        ppo={"learning_rate": 0.001, "anneal_lr": True}, run={"total_steps": 10**9, "time_budget_minutes": 1.5}
    )
    trainer = Trainer(cfg)
    trainer.train_clock = lambda: 60.0  # two thirds of the 90-second budget trained
    try:
        batch, raw_obs, _ = trainer.collect()
        assert trainer.update(batch, raw_obs)["learning_rate"] == pytest.approx(0.001 / 3)
    finally:
        trainer.close()
