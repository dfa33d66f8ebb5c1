"""`check_sequence`: the KER checks on a sequence before training, without Keras running."""

from __future__ import annotations

from trainmedic.events import GuardObservation
from trainmedic.evidence.observations import KERAS_INPUT
from trainmedic.findings import Finding
from trainmedic.keras._inspect import INDEX_BYTES_PER_BATCH, describe_input, sequence_hints
from trainmedic.record import RunRecord
from trainmedic.rules.ker import ker001_sequence_too_short as ker001
from trainmedic.rules.ker import ker002_sequence_len_huge as ker002


def check_sequence(
    seq: object,
    *,
    batch_size: int | None = None,
    n_samples: int | None = None,
    steps_per_epoch: int | None = None,
    shuffle: bool = True,
) -> list[Finding]:
    """Findings (KER001, KER002) about `seq` as fit would use it; an empty list when healthy.

    Only `len(seq)` and attributes are read: no batch is loaded. `batch_size` and
    `n_samples` override what the sequence's attributes suggest.
    """
    info = describe_input(seq, shuffle=shuffle, steps_per_epoch=steps_per_epoch)
    if not info["is_sequence"]:  # a duck-typed sequence: judge it the same way
        try:
            length = len(seq)  # type: ignore[arg-type]
        except TypeError as exc:
            raise TypeError(f"check_sequence needs an object with __len__, got {type(seq).__name__}") from exc
        samples, hinted_batch = sequence_hints(seq)
        info.update(
            is_sequence=True,
            sequence_len=length,
            index_bytes=INDEX_BYTES_PER_BATCH * length,
            samples=samples,
            batch_size=hinted_batch,
        )
    if batch_size is not None:
        info["batch_size"] = batch_size
    if n_samples is not None:
        info["samples"] = n_samples
    record = RunRecord.of([GuardObservation(check=KERAS_INPUT, data=info)])
    return ker001.sequence_too_short(record) + ker002.sequence_len_huge(record)
