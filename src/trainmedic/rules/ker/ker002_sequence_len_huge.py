"""KER002 `sequence-len-huge`: a shuffled Sequence whose index list cannot fit in memory.

Collector: the Keras integration (`trainmedic.keras._auto`'s patched `fit`, the explicit
`trainmedic.keras.Guard`, and `check_sequence`) describes fit's input before the adapter
allocates, as a `keras_input` observation (`is_sequence`, `sequence_len`, `index_bytes`,
`memory_bytes`, `shuffle`, `steps_per_epoch`, `input_type`, `input_class`), and calls
`judge` with it: the guard stops the run with `stop_message` (unless `WARN_ENV` says
"warn"); the rule reads the same observations from the events afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event, GuardObservation
from trainmedic.evidence.observations import KERAS_INPUT
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.keras import fit_input, integer, observations

# A length no real epoch has: 2**31 batches (sys.maxsize, 10**12 ... all qualify).
HUGE_LEN = 2**31
# ... or an index list (36 bytes per batch) taking at least this share of the memory available.
HUGE_INDEX_SHARE = 0.10
#: Set to "warn", the guard reports a huge sequence length but lets fit run.
WARN_ENV = "TRAINMEDIC_KER002"


def _example() -> list[Event]:
    """__len__ returns sys.maxsize and fit shuffles (its default)."""
    return fit_input(
        sequence_len=9_223_372_036_854_775_807,
        index_bytes=36 * 9_223_372_036_854_775_807,
        memory_bytes=16 << 30,
        shuffle=True,
        steps_per_epoch=100,
    )


SPEC = FindingSpec(
    code="KER002",
    slug="sequence-len-huge",
    severity=Severity.ERROR,
    title="Sequence length is huge",
    what=(
        "__len__ of a Sequence / PyDataset passed to fit with shuffle=True is huge (2**31 or "
        "more, e.g. sys.maxsize, or an index list taking 10% or more of the memory "
        "available): the Keras adapter materialises and shuffles list(range(len(seq))) and "
        "runs out of memory. Under `trainmedic run` this is detected before the adapter "
        "allocates, and the run is stopped with this message (TRAINMEDIC_KER002=warn lets it "
        "go on)."
    ),
    why=(
        "sys.maxsize fails at once (a MemoryError, in TensorFlow a ResourceExhaustedError); "
        "a large finite length such as 10**9 grows memory for minutes until the OOM killer "
        "ends the process without a traceback, in every Keras line (Keras 3 on TensorFlow or "
        "torch, legacy tf.keras)."
    ),
    example=(
        "class Forever(keras.utils.Sequence):\n"
        "    def __len__(self):\n"
        "        return sys.maxsize            # 'infinite', steps_per_epoch decides\n"
        "    def __getitem__(self, i):\n"
        "        return self.batch(i % self.n_batches)\n"
        "model.fit(Forever(), steps_per_epoch=100, epochs=10)   # shuffle=True by default"
    ),
    fix=(
        "Return the real number of batches from __len__ and wrap the sequence in "
        "trainmedic.keras.LoopingSequence(seq, multiple=k) (len = k x the real length, index "
        "modulo the real length), keeping steps_per_epoch; or pass shuffle=False."
    ),
    decided_in=("run events",),
    example_input=_example,
)


def is_len_huge(data: Mapping[str, Any]) -> bool:
    """True when shuffling this sequence makes the adapter build an index list too big to hold."""
    length = integer(data, "sequence_len")
    if not data.get("is_sequence") or length is None or data.get("shuffle") in (False, "batch"):
        return False
    memory = integer(data, "memory_bytes")
    index_bytes = integer(data, "index_bytes") or 0
    return length >= HUGE_LEN or (memory is not None and index_bytes >= HUGE_INDEX_SHARE * memory)


def _size(value: object) -> str:
    """Bytes for a message: '3.4 GiB', '2.1e+08 TiB' (sys.maxsize makes absurd sizes)."""
    size = float(value) if isinstance(value, (int, float)) else 0.0
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB" if size < 1e4 else f"{size:.1e} TiB"


def message(data: Mapping[str, Any]) -> str:
    """Words the `keras_input` observation's data."""
    return (
        f"len({data.get('input_type', 'the sequence')}) is {data['sequence_len']:,} with shuffle=True: "
        f"the Keras adapter would build a {_size(data.get('index_bytes'))} index list and run out of memory"
    )


def judge(obs: GuardObservation) -> Finding | None:
    """KER002 for one `keras_input` observation, or None when its index list fits."""
    data = obs.data
    if not is_len_huge(data):
        return None
    return SPEC.finding(
        message(data),
        evidence={
            "sequence_len": data["sequence_len"],
            "index_bytes": data.get("index_bytes"),
            "memory_bytes": data.get("memory_bytes"),
            "shuffle": data.get("shuffle"),
            "steps_per_epoch": data.get("steps_per_epoch"),
            "input_class": data.get("input_class"),
        },
        pid=obs.pid,
        rank=obs.rank,
    )


def stop_message(finding: Finding) -> str:
    """The error the guard raises to stop fit before the adapter allocates."""
    return (
        f"trainmedic {finding.code} {finding.slug}: {finding.message}. Fix: {finding.fix} "
        f"(Set {WARN_ENV}=warn to let fit run anyway.)"
    )


def sequence_len_huge(record: RunRecord) -> list[Finding]:
    return [f for obs in observations(record, KERAS_INPUT) if (f := judge(obs)) is not None]


RULES: tuple[Rule, ...] = (sequence_len_huge,)
