"""RUN011 `guard-check-failed`: a check of the PyTorch guard failed inside trainmedic.

Collector: the PyTorch guard (`trainmedic.torch._safety`). A sampled check, or a part that
runs once a pass, that raises (a tensor kind or a library the guard does not know) loses that
call and the guard goes on; a failure in the per-step bookkeeping turns the guard off. The
first failure of each place is observed as `guard_check_failed` with the `part` (the check or
hook that failed), the `error`, `guard_off` and the `step`. Every rank of a torchrun job observes its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event, GuardObservation
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.guard import observed, ranks_of, where

#: The guard's observation this finding words.
OBSERVATION = "guard_check_failed"


def _example() -> list[Event]:
    """The gradient norms of a check failed on a tensor type the guard does not know."""
    return observed(
        OBSERVATION, part="grad_norms", error="NotImplementedError('no norm')", guard_off=False, step=40
    )


SPEC = FindingSpec(
    code="RUN011",
    slug="guard-check-failed",
    severity=Severity.INFO,
    title="A check of the PyTorch guard failed",
    what=(
        "A check of the PyTorch guard raised an error inside trainmedic; that check was skipped "
        "(or, for the per-step bookkeeping, the guard stopped). Your training was not affected."
    ),
    why=(
        "The findings of that check are missing from this run: a quiet report does not mean it "
        "passed. The error usually names a tensor type or library the guard does not handle yet."
    ),
    example="A model whose weights are a tensor subclass without a norm: the gradient norms fail.",
    fix="Report the error with the tensor types of your model; the other checks ran as usual.",
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def guard_check_failed(record: RunRecord) -> list[Finding]:
    """One info for the run: every place that failed, the ranks, whether the guard stopped."""
    seen: list[GuardObservation] = [o for o in record.guard_observations if o.check == OBSERVATION]
    if not seen:
        return []
    checks: dict[str, dict[str, Any]] = {}
    for o in seen:
        checks.setdefault(str(o.data.get("part")), dict(o.data))
    ranks = ranks_of(seen)
    evidence: dict[str, Any] = {
        "checks": list(checks.values()),
        "guard_off": any(bool(c.get("guard_off")) for c in checks.values()),
    }
    if ranks:
        evidence["ranks"] = ranks
    return [
        SPEC.finding(
            message(evidence) + where(seen),
            evidence=evidence,
            rank=ranks[0] if len(ranks) == 1 else None,
            step=seen[0].step,
            epoch=epoch_number(seen[0].epoch),
        )
    ]


def message(evidence: Mapping[str, Any]) -> str:
    checks = evidence.get("checks") or [{}]
    first = checks[0]
    more = f" and {len(checks) - 1} more" if len(checks) > 1 else ""
    then = (
        "the PyTorch guard stopped there"
        if evidence.get("guard_off")
        else "that check was skipped, the guard went on"
    )
    return f"Internal error in the guard's {first.get('part')}{more}: {first.get('error')}; {then}"


RULES: tuple[Rule, ...] = (guard_check_failed,)
