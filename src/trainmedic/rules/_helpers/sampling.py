"""How often the in-process guard measured what the step-level findings read, per rank.

The PyTorch guard runs its host-syncing checks (gradient norms, per-parameter norms) on
sampled steps: every `every` steps, announced in its `torch_guard` observation, widened
when they would cost too much (`sampling` observations). TRN005, TRN007 and TRN008 state
that sampling in their evidence, and judge each rank of a torchrun job on its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trainmedic.events import GuardObservation, Step
from trainmedic.record import RunRecord


def guard_every(record: RunRecord, rank: int | None = None) -> int | None:
    """How often the in-process guard ran its host-syncing checks (for the evidence)."""
    configs = [o for o in record.guard_observations if o.check == "torch_guard"]
    for obs in sorted(configs, key=lambda o: o.rank != rank):  # this rank's first, then any
        every = obs.data.get("every")
        if isinstance(every, (int, float)):
            return int(every)
    return None


def sampling(record: RunRecord, rank: int | None) -> str:
    """The evidence's "sampling": how often this rank's measurements were taken."""
    every = guard_every(record, rank)
    if not every:
        return "as logged"
    widened = [o for o in record.guard_observations if o.check == "sampling" and o.rank == rank]
    if not widened:
        return f"checked every {every} steps"
    last = widened[-1].data
    budget = last.get("budget")
    share = f"{budget:.1%}".replace(".0%", "%") if isinstance(budget, float) else "a small share"
    return (
        f"checked every {every} steps, every {last.get('every')} from step {last.get('from_step')} "
        f"(kept under {share} of the step time; the loss curve keeps a point every {every} steps)"
    )


def per_rank(items: Iterable[Step | GuardObservation]) -> dict[int | None, list[Any]]:
    """The items grouped by rank, in their order (None: a single process)."""
    grouped: dict[int | None, list[Any]] = {}
    for item in items:
        grouped.setdefault(item.rank, []).append(item)
    return grouped
