"""TOR004 `softmax-into-crossentropy`: probabilities fed to CrossEntropyLoss.

Collector: the PyTorch guard's forward hooks (`trainmedic.torch._forward`, on checked steps)
read the values `nn.CrossEntropyLoss` receives (rows that already sum to 1, or whose exp
does) or the checked step's autograd graph (a softmax feeding cross-entropy's own
log-softmax) and, after two such checked steps, observe `softmax_into_crossentropy` with the
`input_kind` ("probabilities" or "log-probabilities"), how it was seen (`min`, `max`,
`row_sum_error`, or `how` and `graph`) and the `checked_steps`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule
from trainmedic.rules._helpers.guard import observation_rule, observed

#: The guard's observation this finding words.
OBSERVATION = "softmax_into_crossentropy"


def _example() -> list[Event]:
    """CrossEntropyLoss()(softmax(logits), y): every input row already sums to 1."""
    return observed(OBSERVATION, input_kind="probabilities", checked_steps=[10, 20, 30])


SPEC = FindingSpec(
    code="TOR004",
    slug="softmax-into-crossentropy",
    severity=Severity.WARNING,
    title="Softmax fed into CrossEntropyLoss",
    what=(
        "Probabilities or log-probabilities are fed to CrossEntropyLoss (or F.cross_entropy), "
        "which applies log-softmax itself."
    ),
    why="The double softmax squashes the gradients: training is slow and accuracy lower.",
    example="loss = nn.CrossEntropyLoss()(torch.softmax(logits, dim=1), y)",
    fix="Feed raw logits to CrossEntropyLoss (or use NLLLoss on log_softmax outputs).",
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def message(evidence: Mapping[str, Any]) -> str:
    return (
        f"CrossEntropyLoss received {evidence.get('input_kind')} instead of logits (every row already "
        f"sums to 1) in {len(evidence.get('checked_steps', []))} checked steps"
    )


RULES: tuple[Rule, ...] = (observation_rule(SPEC, OBSERVATION, message),)
