"""TRN008 `vanishing-gradients`: the gradient norm of some layers stays near zero.

Collector: the PyTorch guard (`trainmedic.torch._checks`) measures every parameter's gradient
norm on sampled steps and sends a `grad_norms` observation (`OBSERVATION`) with the smallest and
the largest, and the parameters they belong to. `vanishing_gradients` judges each rank.
"""

from __future__ import annotations

from typing import Any

from trainmedic.events import Event, GuardObservation
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord, median
from trainmedic.rules._helpers.sampling import per_rank, sampling

#: The guard's per-parameter gradient norms of a sampled step.
OBSERVATION = "grad_norms"
# -- thresholds (documented in docs/torch.md) ---------------------------------------------------
# A weight whose gradient norm stays this far below the largest one, in most checks.
VANISH_RATIO = 1e-7
VANISH_SHARE = 0.8
VANISH_MIN_RECORDS = 3


def _example() -> list[Event]:
    """A 20-layer sigmoid MLP: the first layer's gradient norm is 1e-9 of the last layer's."""
    norms = {"min": 1e-9, "min_param": "layers.0.weight", "max": 1.5, "max_param": "layers.19.weight"}
    return [
        GuardObservation(t=float(step), pid=100, check=OBSERVATION, data=norms, step=step)
        for step in (100, 200, 300, 400, 500)
    ]


SPEC = FindingSpec(
    code="TRN008",
    slug="vanishing-gradients",
    severity=Severity.WARNING,
    title="Vanishing gradients",
    what="The gradient norm of some layers stays near zero.",
    why="Those layers do not learn; deep nets with saturating activations stall this way.",
    example="A 20-layer sigmoid MLP: first-layer gradient norm 1e-9.",
    fix="Use ReLU/GELU, residual connections, normalisation layers, and a suitable initialisation.",
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def vanishing_gradients(record: RunRecord) -> list[Finding]:
    """TRN008: a weight's gradient norm stays near zero next to the largest one."""
    norms = [o for o in record.guard_observations if o.check == OBSERVATION]
    found: list[Finding] = []
    for rank, observations in per_rank(norms).items():
        steady = observations[1:]
        if len(steady) < VANISH_MIN_RECORDS:
            continue
        vanished = [o for o in steady if _vanished(o.data)]
        if len(vanished) < VANISH_SHARE * len(steady):
            continue
        names = [str(o.data.get("min_param")) for o in vanished]
        worst = max(set(names), key=names.count)
        ratios = [_ratio(o.data) for o in vanished]
        found.append(
            SPEC.finding(
                f"Gradient norm of {worst} stayed near zero ({median(ratios):.1e} of the largest "
                f"layer's) in {len(vanished)} of {len(steady)} checked steps",
                evidence={
                    "parameter": worst,
                    "median_ratio_to_largest": median(ratios),
                    "min_grad_norm": min(float(o.data.get("min", 0.0)) for o in vanished),
                    "largest_layer": str(vanished[-1].data.get("max_param")),
                    "checked_steps": [o.step for o in steady],
                    "threshold_ratio": VANISH_RATIO,
                    "sampling": sampling(record, rank),
                },
                rank=rank,
                step=vanished[-1].step,
            )
        )
    return found


RULES: tuple[Rule, ...] = (vanishing_gradients,)


def _ratio(data: dict[str, Any]) -> float:
    top = float(data.get("max", 0.0))
    return float(data.get("min", 0.0)) / top if top > 0 else 0.0


def _vanished(data: dict[str, Any]) -> bool:
    return float(data.get("max", 0.0)) > 0 and _ratio(data) < VANISH_RATIO
