"""TOR003 `grads-not-zeroed`: gradients accumulate across optimizer steps.

Collector: the PyTorch guard (`trainmedic.torch._hygiene`, `LoopHygiene.watch_zeroing`, with
the watch of `_zeroing`) sees the same gradient tensor of one probe parameter after each
step, changed only by backward(), for `patience` steps in a row, and observes
`grads_not_zeroed` with `steps_without_zeroing`, the `parameter`, the `optimizer` (or
`ParameterUpdates` for a loop that updates the parameters itself) and `how`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule
from trainmedic.rules._helpers.guard import observation_rule, observed

#: The guard's observation this finding words.
OBSERVATION = "grads_not_zeroed"


def _example() -> list[Event]:
    """No optimizer.zero_grad(): the gradient of fc.weight grows over 8 steps."""
    return observed(OBSERVATION, steps_without_zeroing=8, optimizer="SGD", parameter="fc.weight")


SPEC = FindingSpec(
    code="TOR003",
    slug="grads-not-zeroed",
    severity=Severity.ERROR,
    title="Gradients are never zeroed",
    what="Gradients accumulate across optimizer steps without zero_grad, and no accumulation is configured.",
    why=(
        "Each step applies the sum of all past gradients: the effective learning rate grows "
        "without bound. trainmedic sees the same gradient tensor after every step, changed only "
        "by backward(), so any way of zeroing (zero_grad, p.grad = None, p.grad.zero_()) counts."
    ),
    example="for x, y in loader: loss(model(x), y).backward(); opt.step()  # no opt.zero_grad()",
    fix="Call optimizer.zero_grad(set_to_none=True) once per optimizer step.",
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def message(evidence: Mapping[str, Any]) -> str:
    updates = "updates" if evidence.get("optimizer") == "ParameterUpdates" else "optimizer steps"
    return (
        f"Gradients accumulated across {evidence.get('steps_without_zeroing')} consecutive "
        f"{updates} without being zeroed (parameter {evidence.get('parameter')})"
    )


RULES: tuple[Rule, ...] = (observation_rule(SPEC, OBSERVATION, message),)
