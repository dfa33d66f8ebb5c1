"""TOR006 `scheduler-before-optimizer`: `lr_scheduler.step()` before `optimizer.step()`.

Collector: the PyTorch guard (`trainmedic.torch._hygiene`) sees a scheduler step while its
optimizer has taken none and observes `scheduler_before_optimizer` with both class names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule
from trainmedic.rules._helpers.guard import observation_rule, observed

#: The guard's observation this finding words.
OBSERVATION = "scheduler_before_optimizer"


def _example() -> list[Event]:
    """scheduler.step() before the first optimizer.step()."""
    return observed(OBSERVATION, scheduler="StepLR", optimizer="SGD")


SPEC = FindingSpec(
    code="TOR006",
    slug="scheduler-before-optimizer",
    severity=Severity.WARNING,
    title="lr_scheduler.step() before optimizer.step()",
    what="lr_scheduler.step() is called before optimizer.step().",
    why=(
        "The first value of the schedule is skipped: warm-up and decay are shifted by one step or "
        "epoch. PyTorch warns once ('Detected call of `lr_scheduler.step()` before "
        "`optimizer.step()`'), a line easily lost in a long log."
    ),
    example="scheduler.step(); optimizer.step()",
    fix="Call optimizer.step() first, then scheduler.step().",
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def message(evidence: Mapping[str, Any]) -> str:
    return (
        f"{evidence.get('scheduler')}.step() was called before the first optimizer.step() "
        f"of {evidence.get('optimizer')}: the first learning-rate value was skipped"
    )


RULES: tuple[Rule, ...] = (observation_rule(SPEC, OBSERVATION, message),)
