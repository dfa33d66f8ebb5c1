"""The in-process guards' observations, turned into findings the same way for every code.

A guard (`trainmedic.torch`, auto-installed under `run`) measures and sends a
`GuardObservation` whose `check` names what it saw, with the measured facts in `data`;
every rank of a torchrun job sends its own. A finding's file words one check with
`observation_rule`: one finding for the job, the ranks it was seen on listed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from trainmedic.events import Event, GuardObservation
from trainmedic.findings import Finding, FindingSpec, epoch_number
from trainmedic.record import Rule, RunRecord

#: Words a finding from the guard's evidence (its observation's `data`, with "ranks" added).
Wording = Callable[[Mapping[str, Any]], str]


def observed(check: str, **data: Any) -> list[Event]:
    """What the guard sends when it sees `check` (rank 0 of the job, at step 40 of epoch 1)."""
    return [GuardObservation(t=1.0, pid=100, rank=0, check=check, data=data, step=40, epoch=0)]


def ranks_of(observations: list[GuardObservation]) -> list[int]:
    return sorted({o.rank for o in observations if o.rank is not None})


def where(observations: list[GuardObservation]) -> str:
    """ " (rank 0)" or " (ranks 0, 1)": appended to a message, empty for a single process."""
    ranks = ranks_of(observations)
    if not ranks:
        return ""
    return f" (rank {ranks[0]})" if len(ranks) == 1 else f" (ranks {', '.join(map(str, ranks))})"


def names(items: object, limit: int = 5) -> str:
    """Up to `limit` names of a list, then "and N more"."""
    shown_items = [str(n) for n in items] if isinstance(items, list) else []
    shown = ", ".join(shown_items[:limit])
    extra = len(shown_items) - limit
    return shown + (f" and {extra} more" if extra > 0 else "")


def observation_rule(
    spec: FindingSpec,
    check: str,
    message: Wording,
    fix: Callable[[Mapping[str, Any]], str | None] | None = None,
    *,
    derived: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
) -> Rule:
    """A rule that turns the guard observations named `check` into one finding, ranks merged.

    `message` words the first observation's evidence; `fix`, when given, may return a fix
    that depends on it (None keeps the spec's); `derived`, when given, returns keys the
    finding's file concludes from the evidence, added to it before it is worded.
    """

    def rule(record: RunRecord) -> list[Finding]:
        seen = [o for o in record.guard_observations if o.check == check]
        if not seen:
            return []
        first = seen[0]
        ranks = ranks_of(seen)
        evidence = {**first.data, "ranks": ranks} if ranks else dict(first.data)
        if derived is not None:
            evidence.update(derived(evidence))
        return [
            spec.finding(
                message(evidence) + where(seen),
                evidence=evidence,
                fix=fix(evidence) if fix is not None else None,
                rank=ranks[0] if len(ranks) == 1 else None,
                step=first.step,
                epoch=epoch_number(first.epoch),
            )
        ]

    rule.__name__ = spec.slug.replace("-", "_") + "_" + check
    rule.__doc__ = f"{spec.code}: from the guard's {check!r} observations."
    return rule
