"""TOR005 `sampler-epoch-not-set`: a DistributedSampler whose epoch is never set.

Collector: the PyTorch guard (`trainmedic.torch._hygiene`, `LoopHygiene.on_sampler_iter`)
notes a shuffling DistributedSampler's epoch at each pass over it whose batches were trained
on (optimizer steps between the pass's start and its loader's last batch: an evaluation loader's
sampler, whose order does not matter, is never judged), asks `epoch_not_set` here, and observes `sampler_epoch_not_set` with the `iterations` (passes
that trained), the repeated `epoch`, `num_replicas`, `sampler_rank`, `local_rank` and
`shuffle`. Every rank of a torchrun job observes its own; the finding lists the ranks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule
from trainmedic.rules._helpers.guard import observation_rule, observed

#: The guard's observation this finding words.
OBSERVATION = "sampler_epoch_not_set"
#: Training passes over the sampler needed to see that its epoch stays the same.
MIN_PASSES = 2


def _example() -> list[Event]:
    """A DistributedSampler iterated for 5 epochs without set_epoch."""
    return observed(OBSERVATION, iterations=5, epoch=0)


SPEC = FindingSpec(
    code="TOR005",
    slug="sampler-epoch-not-set",
    severity=Severity.WARNING,
    title="DistributedSampler.set_epoch never called",
    what="A DistributedSampler is used but set_epoch is never called: every epoch sees the same order.",
    why=(
        "DistributedSampler seeds its shuffle with seed + epoch: without set_epoch every epoch "
        "repeats the first epoch's order on every rank, which hurts convergence and generalisation."
    ),
    example="for epoch in range(E): for batch in loader: ...  # no sampler.set_epoch(epoch)",
    fix="Call sampler.set_epoch(epoch) at the start of every epoch, before iterating the loader.",
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def epoch_not_set(epochs: Sequence[object], shuffle: bool) -> bool:
    """The sampler's epoch at the start of each training pass: the last two the same, shuffling."""
    return shuffle and len(epochs) >= MIN_PASSES and epochs[-1] == epochs[-2]


def message(evidence: Mapping[str, Any]) -> str:
    return (
        f"DistributedSampler was iterated {evidence.get('iterations')} times with the same epoch "
        f"({evidence.get('epoch')}): set_epoch was not called, so every epoch saw the same order"
    )


RULES: tuple[Rule, ...] = (observation_rule(SPEC, OBSERVATION, message),)
