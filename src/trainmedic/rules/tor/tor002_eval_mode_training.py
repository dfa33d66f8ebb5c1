"""TOR002 `eval-mode-training`: optimizer steps taken with the model in eval() mode.

Collector: the PyTorch guard's forward hooks (`trainmedic.torch._forward`, on checked steps)
see every dropout/batch-norm layer run in eval() mode in a model in eval() mode (partial
eval() is deliberate freezing) and, after two such checked steps, observe
`eval_mode_training` with the layer classes (`modules`) and the `checked_steps`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule
from trainmedic.rules._helpers.guard import names, observation_rule, observed

#: The guard's observation this finding words.
OBSERVATION = "eval_mode_training"


def _example() -> list[Event]:
    """model.eval() before the loop and never model.train(): dropout off in every step."""
    return observed(OBSERVATION, modules=["dropout", "bn1"], checked_steps=[10, 20, 30])


SPEC = FindingSpec(
    code="TOR002",
    slug="eval-mode-training",
    severity=Severity.ERROR,
    title="Training in eval() mode",
    what="Optimizer steps are taken while the model (with dropout/batch-norm) is in eval() mode.",
    why="Dropout is off and batch-norm statistics freeze: the model trains differently than intended.",
    example="validate() calls model.eval() and the loop never calls model.train() again.",
    fix="Call model.train() at the start of every training epoch (after validation).",
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def message(evidence: Mapping[str, Any]) -> str:
    return (
        f"Optimizer steps were taken with every dropout/batch-norm layer in eval() mode "
        f"({names(evidence.get('modules'))}) in {len(evidence.get('checked_steps', []))} checked steps"
    )


RULES: tuple[Rule, ...] = (observation_rule(SPEC, OBSERVATION, message),)
