"""TOR009 `single-class-cross-entropy`: a cross-entropy over one class, identically 0.

Collector: the PyTorch guard's forward watch (`trainmedic.torch._forward`, on checked steps)
reads the saved output of the loss graph's `LogSoftmaxBackward0` just before backward and,
when it was taken over a dimension of size 1 in two checked steps, observes
`single_class_softmax` with the output `shape`, the `dim`, `how` and the `checked_steps`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule
from trainmedic.rules._helpers.guard import observation_rule, observed

#: The guard's observation this finding words.
OBSERVATION = "single_class_softmax"


def _example() -> list[Event]:
    """A 1-unit output into cross-entropy: log_softmax over a dimension of size 1."""
    return observed(OBSERVATION, dim=1, shape=[32, 1], checked_steps=[10, 20, 30])


SPEC = FindingSpec(
    code="TOR009",
    slug="single-class-cross-entropy",
    severity=Severity.ERROR,
    title="Cross-entropy over a single class",
    what=(
        "The loss takes a (log-)softmax over a dimension of size 1, e.g. F.cross_entropy on a "
        "model output with one column: the loss is exactly 0 and no gradient reaches the model."
    ),
    why=(
        "Softmax over one class is 1 whatever the logit, so its log is 0: the loss is 0.0 and the "
        "gradient norm 0.0 at every step on every rank. Nothing fails and nothing learns; the "
        "weights stay at their initial values. trainmedic reads the saved output of the loss "
        "graph's log-softmax just before backward on checked steps."
    ),
    example=(
        "model = nn.Linear(20, 1); loss = F.cross_entropy(model(x), y)  # one output column: "
        "softmax over one class"
    ),
    fix=(
        "Give the last layer one output per class (nn.Linear(d, num_classes), num_classes >= 2) "
        "for cross_entropy; for a binary target use one logit with BCEWithLogitsLoss, and for a "
        "real-valued target MSELoss."
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def message(evidence: Mapping[str, Any]) -> str:
    return (
        f"The loss takes log_softmax over dimension {evidence.get('dim')} of size 1 (output shape "
        f"{evidence.get('shape')}) in {len(evidence.get('checked_steps', []))} checked steps: it is "
        "identically 0 and sends no gradient back, so the model cannot learn"
    )


RULES: tuple[Rule, ...] = (observation_rule(SPEC, OBSERVATION, message),)
