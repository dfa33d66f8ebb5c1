"""TRN001 on a curve logged by several ranks: the finding names the rank whose own loss went
NaN/Inf first (the merged curve, their mean, cannot say), and per-epoch reports are read when
the step curve is a sample that missed the NaN. Ray Train's real run: tests/breadth/test_ray.py."""

from __future__ import annotations

import math

from trainmedic.events import Epoch, Event, Step
from trainmedic.record import RunRecord
from trainmedic.rules.trn import trn001_nonfinite_loss as trn001


def ranked_epochs(**per_rank: list[float]) -> list[Event]:
    """Epoch reports of ranks `r0`, `r1`, ... (each its own worker process), as Ray Train sends them."""
    return [
        Epoch(t=float(i), pid=100 + int(name[1:]), rank=int(name[1:]), epoch=i, metrics={"loss": loss})
        for name, losses in per_rank.items()
        for i, loss in enumerate(losses)
    ]


def test_the_rank_whose_loss_went_nan_is_named() -> None:
    events = ranked_epochs(
        r0=[500.0, 330.0, 220.0, 145.0, 96.0], r1=[500.0, 330.0, 220.0, math.nan, math.nan]
    )
    [finding] = trn001.nonfinite_loss(RunRecord.of(events))
    assert finding.rank == 1
    assert finding.evidence["ranks"] == [1]
    assert finding.message.startswith("Loss `loss` became NaN at epoch 4 on rank 1; last finite value")


def test_ranks_that_went_nan_together_are_all_named() -> None:
    events = ranked_epochs(r0=[1.0, 0.9, math.inf], r1=[1.0, 0.9, math.nan], r2=[1.0, 0.9, 0.8])
    [finding] = trn001.nonfinite_loss(RunRecord.of(events))
    assert finding.rank is None
    assert finding.evidence["ranks"] == [0, 1]
    assert " on ranks 0, 1;" in finding.message


def test_healthy_ranks_give_nothing() -> None:
    events = ranked_epochs(r0=[1.0, 0.9, 0.8, 0.7], r1=[1.1, 0.95, 0.85, 0.72])
    assert trn001.nonfinite_loss(RunRecord.of(events)) == []


def test_one_process_names_no_rank() -> None:
    events = [
        Epoch(t=float(i), pid=100, epoch=i, metrics={"loss": v}) for i, v in enumerate([1.0, 0.9, math.nan])
    ]
    [finding] = trn001.nonfinite_loss(RunRecord.of(events))
    assert "ranks" not in finding.evidence
    assert finding.rank is None
    assert finding.message.startswith("Loss `loss` became NaN at epoch 3; last finite value")


def test_epoch_reports_are_read_when_the_sampled_steps_missed_the_nan() -> None:
    """A guard that keeps step 1 of 8 and a worker that reports every epoch: the NaN is only
    in the reports, and it is found there."""
    steps: list[Event] = [Step(t=0.5, pid=100 + r, rank=r, step=1, metrics={"loss": 500.0}) for r in (0, 1)]
    events = steps + ranked_epochs(r0=[500.0, 330.0, 220.0, 145.0], r1=[500.0, 330.0, math.nan, math.nan])
    [finding] = trn001.nonfinite_loss(RunRecord.of(events))
    assert (finding.rank, finding.epoch, finding.evidence["value"]) == (1, 3, "NaN")  # epochs count from 1
