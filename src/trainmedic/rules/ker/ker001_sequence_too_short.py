"""KER001 `sequence-too-short`: a Sequence that yields far fewer batches than its data.

Collector: the Keras integration (`trainmedic.keras._auto`'s patched `fit`, the explicit
`trainmedic.keras.Guard`, and `check_sequence`) describes fit's input as a `keras_input`
observation (`is_sequence`, `sequence_len`, `samples`, `batch_size`, `steps_per_epoch`,
`input_type`) read from len(seq) and the sequence's attributes, before training; the
`Epoch` events that follow carry the batches each epoch really ran. A sequence whose
length is huge is KER002's, not this finding's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event
from trainmedic.evidence.observations import KERAS_INPUT
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.keras import epochs_after, fit_input, integer, observations
from trainmedic.rules.ker import ker002_sequence_len_huge as ker002

# A sequence "far below" its data yields at most this share of ceil(samples / batch_size) batches.
FAR_BELOW = 0.5


def _example() -> list[Event]:
    """640 samples at batch size 32 make 20 batches; __len__ says 2."""
    return fit_input(sequence_len=2, samples=640, batch_size=32, shuffle=True)


SPEC = FindingSpec(
    code="KER001",
    slug="sequence-too-short",
    severity=Severity.ERROR,
    title="Sequence yields too few batches",
    what=(
        "A keras.utils.Sequence / PyDataset yields far fewer batches per epoch than "
        "samples / batch size (at most half), or fewer than the steps_per_epoch fit was given. "
        "trainmedic reads len(seq) and the samples and batch size the sequence holds "
        "(attributes such as x, filenames, batch_size) before training, and the batches each "
        "epoch really ran."
    ),
    why=(
        "Each 'epoch' sees a fraction of the data: the loss curve looks like a model that "
        "stalls, learning-rate schedules and early stopping count the wrong epochs, and "
        "tuning the model cannot fix it. With steps_per_epoch above len(seq), Keras 3 runs "
        "fewer steps than asked every epoch and legacy tf.keras stops after the first epoch."
    ),
    example=(
        "class Batches(keras.utils.PyDataset):\n"
        "    def __len__(self):\n"
        "        return len(self.x) // self.batch_size // 10   # 2 of 20 batches\n"
        "model.fit(Batches(x, y, batch_size=32), epochs=5)"
    ),
    fix=(
        "Make __len__ return math.ceil(n_samples / batch_size); to train a fixed number of "
        "steps over a short sequence, wrap it in trainmedic.keras.LoopingSequence(seq, "
        "multiple=k) and set steps_per_epoch."
    ),
    decided_in=("run events",),
    example_input=_example,
)


def short_of(evidence: Mapping[str, Any]) -> str | None:
    """What the sequence's length falls short of: "samples", "steps_per_epoch", or None."""
    length, expected = evidence["sequence_len"], evidence["expected_batches"]
    steps = evidence["steps_per_epoch"]
    if expected is not None and length <= FAR_BELOW * expected:
        return "samples"
    if steps is not None and length < steps:
        return "steps_per_epoch"
    return None


def message(name: object, evidence: Mapping[str, Any]) -> str:
    """Words the finding for the input `name` (its class), from its evidence."""
    length = evidence["sequence_len"]
    if short_of(evidence) == "samples":
        return (
            f"{name} yields {length} batches per epoch; its {evidence['samples']} samples at batch "
            f"size {evidence['batch_size']} make {evidence['expected_batches']}"
        )
    return (
        f"{name} yields {length} batches per epoch, fewer than steps_per_epoch={evidence['steps_per_epoch']}"
    )


def sequence_too_short(record: RunRecord) -> list[Finding]:
    found = []
    for obs in observations(record, KERAS_INPUT):
        data = obs.data
        length = integer(data, "sequence_len")
        if not data.get("is_sequence") or length is None or ker002.is_len_huge(data):
            continue
        samples, batch = integer(data, "samples"), integer(data, "batch_size")
        expected = math.ceil(samples / batch) if samples and batch else None
        evidence = {
            "sequence_len": length,
            "samples": samples,
            "batch_size": batch,
            "expected_batches": expected,
            "steps_per_epoch": integer(data, "steps_per_epoch"),
            "batches_per_epoch": [e.steps for e in epochs_after(record, obs) if e.steps is not None],
        }
        if short_of(evidence) is None:
            continue
        name = data.get("input_type", "the sequence")
        found.append(SPEC.finding(message(name, evidence), evidence=evidence, pid=obs.pid, rank=obs.rank))
    return found


RULES: tuple[Rule, ...] = (sequence_too_short,)
