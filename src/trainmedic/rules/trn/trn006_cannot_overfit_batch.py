"""TRN006 `cannot-overfit-batch`: the tiny-batch overfit test failed.

Collector: `trainmedic.torch.overfit_batch` trains a copy of the model on one fixed batch and
sends an `overfit_batch` observation (`OBSERVATION`) with the first and final loss, the steps, the
learning rate and the batch size; it calls `judge` for the finding it returns, and `failed`
for its verdict. `cannot_overfit_batch` judges the observations a run sent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event, GuardObservation
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord

#: The observation the overfit test sends.
OBSERVATION = "overfit_batch"
# -- thresholds (documented in docs/torch.md) ---------------------------------------------------
# The test passes when the final loss is this small (absolute, or vs the first).
OVERFIT_ABS = 1e-2
OVERFIT_REL = 0.05


def _example() -> list[Event]:
    """The tiny-batch test: the loss on a fixed batch of 8 stays at 2.2 after 200 steps."""
    result = {"batch_size": 8, "initial_loss": 2.31, "final_loss": 2.2, "steps": 200}
    return [GuardObservation(t=1.0, pid=100, check=OBSERVATION, data=result)]


SPEC = FindingSpec(
    code="TRN006",
    slug="cannot-overfit-batch",
    severity=Severity.ERROR,
    title="Cannot overfit one small batch",
    what="The tiny-batch overfit test failed: the model cannot drive the loss on one small batch near zero.",
    why="A model that cannot memorise 8 examples has a bug: it will not learn the full data set either.",
    example="Loss on a fixed batch of 8 stays at 2.2 after 200 steps.",
    fix=(
        "Check that the loss gets logits (not probabilities), the labels match the inputs, "
        "parameters are in the optimizer and require grad, and the learning rate."
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def failed(data: Mapping[str, Any]) -> bool:
    """The tiny-batch test's verdict, shared by the rule and `overfit_batch`'s result."""
    first, last = float(data["initial_loss"]), float(data["final_loss"])
    if not math.isfinite(last):
        return True
    return last > max(OVERFIT_ABS, OVERFIT_REL * first)


def judge(data: Mapping[str, Any], *, rank: int | None = None) -> Finding | None:
    """TRN006 for one test's result (the `overfit_batch` observation's data), None if it passed."""
    if not failed(data):
        return None
    target = max(OVERFIT_ABS, OVERFIT_REL * float(data["initial_loss"]))
    return SPEC.finding(
        f"Loss on one batch of {data.get('batch_size')} went from {data['initial_loss']:.4g} "
        f"to {data['final_loss']:.4g} in {data['steps']} steps (target <= {target:.3g})",
        evidence={**data, "target_loss": target},
        rank=rank,
    )


def cannot_overfit_batch(record: RunRecord) -> list[Finding]:
    """TRN006: the tiny-batch overfit test did not drive the loss near zero."""
    judged = (judge(obs.data, rank=obs.rank) for obs in record.guard_observations if obs.check == OBSERVATION)
    return [f for f in judged if f is not None]


RULES: tuple[Rule, ...] = (cannot_overfit_batch,)
