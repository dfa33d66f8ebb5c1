"""TOR007 `decay-on-norm-bias`: weight decay on bias and normalisation parameters.

Collector: the PyTorch guard (`trainmedic.torch._hygiene`, `LoopHygiene.first_check`, at the
first checked step) lists the trainable tensors of at most one dimension (biases, norm
weights) in a parameter group with weight decay, and observes `decay_on_norm_bias` with the
`weight_decay`, their `count`, up to 20 `params` names and the `optimizer` class.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule
from trainmedic.rules._helpers.guard import names, observation_rule, observed

#: The guard's observation this finding words.
OBSERVATION = "decay_on_norm_bias"


def _example() -> list[Event]:
    """AdamW(model.parameters(), weight_decay=0.1): biases and LayerNorm weights decay too."""
    return observed(OBSERVATION, weight_decay=0.1, count=2, params=["ln.weight", "fc.bias"])


SPEC = FindingSpec(
    code="TOR007",
    slug="decay-on-norm-bias",
    severity=Severity.INFO,
    title="Weight decay on bias and normalisation parameters",
    what="Weight decay is applied to bias and normalisation parameters.",
    why="Decaying them regularises nothing useful and can cost accuracy, especially with AdamW.",
    example="AdamW(model.parameters(), weight_decay=0.05)",
    fix="Use trainmedic.train.param_groups(model, weight_decay) to exclude bias and norm parameters.",
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def message(evidence: Mapping[str, Any]) -> str:
    return (
        f"Weight decay {evidence.get('weight_decay')} is applied to {evidence.get('count')} "
        f"bias/normalisation parameter tensors: {names(evidence.get('params'))}"
    )


RULES: tuple[Rule, ...] = (observation_rule(SPEC, OBSERVATION, message),)
