"""KER: Keras / TensorFlow input pipeline and fit bookkeeping.

The Keras integration (auto-instrumentation under `trainmedic run`, or
`trainmedic.keras.Guard`) describes every `fit` call with two observations:
`keras_input` (what fit was given: sequence length, samples, batch size,
steps_per_epoch, shuffle, memory available) before the adapter touches the
data, `keras_output` (the last layer of a built model: its activation and output
width) and `keras_fit_end` (epochs requested and run, what stopped training).
The rules below read those and the `Epoch` events (with the batches each epoch
really ran); the in-process guard calls the same functions to stop a run
before an OOM.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from trainmedic.events import Epoch, Event, GuardObservation
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord

INPUT_CHECK = "keras_input"
FIT_END_CHECK = "keras_fit_end"
OUTPUT_CHECK = "keras_output"
# A sequence "far below" its data yields at most this share of ceil(samples / batch_size) batches.
FAR_BELOW = 0.5
# A length no real epoch has: 2**31 batches (sys.maxsize, 10**12 ... all qualify).
HUGE_LEN = 2**31
# ... or an index list (36 bytes per batch) taking at least this share of the memory available.
HUGE_INDEX_SHARE = 0.10


def _fit_input(**data: Any) -> list[Event]:
    """The `keras_input` observation of one fit over a Sequence (PID 100)."""
    described = {"is_sequence": True, "input_type": "Batches", "input_class": "train.Batches", **data}
    return [GuardObservation(t=1.0, pid=100, check=INPUT_CHECK, data=described)]


def _sequence_too_short_example() -> list[Event]:
    """640 samples at batch size 32 make 20 batches; __len__ says 2."""
    return _fit_input(sequence_len=2, samples=640, batch_size=32, shuffle=True)


def _sequence_len_huge_example() -> list[Event]:
    """__len__ returns sys.maxsize and fit shuffles (its default)."""
    return _fit_input(
        sequence_len=9_223_372_036_854_775_807,
        index_bytes=36 * 9_223_372_036_854_775_807,
        memory_bytes=16 << 30,
        shuffle=True,
        steps_per_epoch=100,
    )


def _history_epochs_mismatch_example() -> list[Event]:
    """Legacy tf.keras: fit(ds, epochs=3, steps_per_epoch=10) over 4 batches returns after 1 epoch."""
    return [
        *_fit_input(sequence_len=4, samples=64, batch_size=16, steps_per_epoch=10, is_sequence=False),
        Epoch(t=2.0, pid=100, epoch=0, steps=4),
        GuardObservation(
            t=3.0,
            pid=100,
            check=FIT_END_CHECK,
            data={"epochs_requested": 3, "epochs_run": 1, "completed": True, "steps_per_epoch": 10},
        ),
    ]


def _single_unit_softmax_example() -> list[Event]:
    """A binary classifier whose head is Dense(1, activation="softmax"), seen when fit starts."""
    return [
        GuardObservation(
            t=1.0,
            pid=100,
            check=OUTPUT_CHECK,
            data={
                "layer": "dense_1",
                "layer_class": "Dense",
                "activation": "softmax",
                "units": 1,
                "loss": "binary_crossentropy",
            },
        )
    ]


SEQUENCE_TOO_SHORT = FindingSpec(
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
    example_input=_sequence_too_short_example,
)

SEQUENCE_LEN_HUGE = FindingSpec(
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
    example_input=_sequence_len_huge_example,
)

HISTORY_EPOCHS_MISMATCH = FindingSpec(
    code="KER003",
    slug="history-epochs-mismatch",
    severity=Severity.ERROR,
    title="History holds fewer epochs than requested",
    what=(
        "After fit, history.epoch (len(history.history['loss'])) holds fewer epochs than "
        "epochs - initial_epoch, and neither EarlyStopping nor a callback setting "
        "model.stop_training explains it."
    ),
    why=(
        "fit returned early and quietly: the script goes on to save and evaluate an "
        "undertrained model and exits 0. The usual cause is legacy tf.keras meeting an input "
        "that ran out of data ('Your input ran out of data; interrupting training')."
    ),
    example=(
        "ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)   # 4 batches, no .repeat()\n"
        "history = model.fit(ds, epochs=3, steps_per_epoch=10)      # legacy tf.keras\n"
        "len(history.history['loss'])  # 1"
    ),
    fix=(
        "Find what ended fit: for an exhausted input, add .repeat() to the dataset, wrap the "
        "Sequence in trainmedic.keras.LoopingSequence, or set steps_per_epoch to the batches "
        "the input really has."
    ),
    example_input=_history_epochs_mismatch_example,
)

SINGLE_UNIT_SOFTMAX = FindingSpec(
    code="KER004",
    slug="single-unit-softmax",
    severity=Severity.ERROR,
    title="Softmax over a single output unit",
    what=(
        "The model's output layer applies softmax over an output of width 1 (Dense(1, "
        "activation='softmax'), or a Softmax / Activation('softmax') layer after one unit). "
        "trainmedic reads the last layer's activation and the output width when fit starts."
    ),
    why=(
        "Softmax normalises over the last axis; over one unit it is exp(z) / exp(z) = 1.0 for "
        "every input and its gradient is 0. The model predicts the positive class everywhere, "
        "the loss stays where it started and the weights never change, while fit runs without "
        "an error (Keras 3 prints one UserWarning, easily lost in a long log)."
    ),
    example=(
        "model = keras.Sequential([..., keras.layers.Dense(1, activation='softmax')])\n"
        "model.compile(loss='binary_crossentropy', optimizer='adam')"
    ),
    fix=(
        "For a binary target use Dense(1, activation='sigmoid') with binary_crossentropy; for "
        "K classes use Dense(K, activation='softmax') with (sparse_)categorical_crossentropy."
    ),
    example_input=_single_unit_softmax_example,
)

SPECS: tuple[FindingSpec, ...] = (
    SEQUENCE_TOO_SHORT,
    SEQUENCE_LEN_HUGE,
    HISTORY_EPOCHS_MISMATCH,
    SINGLE_UNIT_SOFTMAX,
)


def _observations(record: RunRecord, check: str) -> list[GuardObservation]:
    return [o for o in record.guard_observations if o.check == check]


def _epochs_after(record: RunRecord, obs: GuardObservation) -> list[Epoch]:
    """Epoch events of the fit `obs` describes: same process, until its next fit began."""
    later = [o.t for o in _observations(record, INPUT_CHECK) if o.pid == obs.pid and o.t > obs.t]
    until = min(later, default=math.inf)
    return [e for e in record.of_type(Epoch) if e.pid == obs.pid and obs.t <= e.t < until]


def _int(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def is_len_huge(data: Mapping[str, Any]) -> bool:
    """True when shuffling this sequence makes the adapter build an index list too big to hold."""
    length = _int(data, "sequence_len")
    if not data.get("is_sequence") or length is None or data.get("shuffle") in (False, "batch"):
        return False
    memory = _int(data, "memory_bytes")
    index_bytes = _int(data, "index_bytes") or 0
    return length >= HUGE_LEN or (memory is not None and index_bytes >= HUGE_INDEX_SHARE * memory)


def _size(value: object) -> str:
    """Bytes for a message: '3.4 GiB', '2.1e+08 TiB' (sys.maxsize makes absurd sizes)."""
    size = float(value) if isinstance(value, (int, float)) else 0.0
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB" if size < 1e4 else f"{size:.1e} TiB"


def sequence_len_huge(record: RunRecord) -> list[Finding]:
    found = []
    for obs in _observations(record, INPUT_CHECK):
        if not is_len_huge(obs.data):
            continue
        name = obs.data.get("input_type", "the sequence")
        length = obs.data["sequence_len"]
        found.append(
            SEQUENCE_LEN_HUGE.finding(
                f"len({name}) is {length:,} with shuffle=True: the Keras adapter would build a "
                f"{_size(obs.data.get('index_bytes'))} index list and run out of memory",
                evidence={
                    "sequence_len": length,
                    "index_bytes": obs.data.get("index_bytes"),
                    "memory_bytes": obs.data.get("memory_bytes"),
                    "shuffle": obs.data.get("shuffle"),
                    "steps_per_epoch": obs.data.get("steps_per_epoch"),
                    "input_class": obs.data.get("input_class"),
                },
                pid=obs.pid,
                rank=obs.rank,
            )
        )
    return found


def sequence_too_short(record: RunRecord) -> list[Finding]:
    found = []
    for obs in _observations(record, INPUT_CHECK):
        data = obs.data
        length = _int(data, "sequence_len")
        if not data.get("is_sequence") or length is None or is_len_huge(data):
            continue
        samples, batch = _int(data, "samples"), _int(data, "batch_size")
        steps = _int(data, "steps_per_epoch")
        expected = math.ceil(samples / batch) if samples and batch else None
        observed = [e.steps for e in _epochs_after(record, obs) if e.steps is not None]
        name = data.get("input_type", "the sequence")
        evidence = {
            "sequence_len": length,
            "samples": samples,
            "batch_size": batch,
            "expected_batches": expected,
            "steps_per_epoch": steps,
            "batches_per_epoch": observed,
        }
        if expected is not None and length <= FAR_BELOW * expected:
            message = (
                f"{name} yields {length} batches per epoch; its {samples} samples at batch "
                f"size {batch} make {expected}"
            )
        elif steps is not None and length < steps:
            message = f"{name} yields {length} batches per epoch, fewer than steps_per_epoch={steps}"
        else:
            continue
        found.append(SEQUENCE_TOO_SHORT.finding(message, evidence=evidence, pid=obs.pid, rank=obs.rank))
    return found


def history_epochs_mismatch(record: RunRecord) -> list[Finding]:
    found = []
    inputs = _observations(record, INPUT_CHECK)
    for end in _observations(record, FIT_END_CHECK):
        data = end.data
        requested, ran = _int(data, "epochs_requested"), _int(data, "epochs_run")
        initial = _int(data, "initial_epoch") or 0
        if data.get("completed") and requested is not None and requested <= 0 < initial and ran == 0:
            found.append(_no_epoch_to_run(end, requested + initial, initial))
            continue
        if not data.get("completed") or requested is None or ran is None or ran >= requested:
            continue
        if data.get("stopped_by"):
            continue
        begun = [o for o in inputs if o.pid == end.pid and o.t <= end.t]
        epochs = _epochs_after(record, begun[-1]) if begun else []
        steps = _int(begun[-1].data, "steps_per_epoch") if begun else None
        steps = _int(data, "steps_per_epoch") or steps
        last_steps = epochs[-1].steps if epochs else None
        exhausted = steps is not None and last_steps is not None and last_steps < steps
        evidence = {
            "epochs_requested": requested,
            "epochs_run": ran,
            "initial_epoch": data.get("initial_epoch", 0),
            "steps_per_epoch": steps,
            "last_epoch_steps": last_steps,
            "input_exhausted": exhausted,
            "early_stopping": data.get("early_stopping", False),
        }
        cause = f"; its last epoch ran {last_steps} of {steps} steps (input ran out)" if exhausted else ""
        found.append(
            HISTORY_EPOCHS_MISMATCH.finding(
                f"fit returned after {ran} of {requested} epochs, and no EarlyStopping or "
                f"stop_training explains it{cause}",
                evidence=evidence,
                pid=end.pid,
                rank=end.rank,
                epoch=ran,
            )
        )
    return found


def _no_epoch_to_run(end: GuardObservation, epochs: int, initial: int) -> Finding:
    """fit(epochs=5, initial_epoch=5): Keras' `epochs` is the epoch to stop before, not a count
    to add, so a continued fit given the count of its new epochs trains nothing."""
    return HISTORY_EPOCHS_MISMATCH.finding(
        f"fit(epochs={epochs}, initial_epoch={initial}) ran no epoch: Keras' `epochs` is the "
        "index to stop at, not a number of epochs to add (expected only when a resumed run "
        "had already finished)",
        evidence={"epochs": epochs, "initial_epoch": initial, "epochs_run": 0},
        fix="Pass epochs=initial_epoch + the epochs to train (the fine-tuning guide: "
        "epochs=initial_epochs + fine_tune_epochs, initial_epoch=history.epoch[-1]).",
        severity=Severity.WARNING,
        pid=end.pid,
        rank=end.rank,
    )


def is_single_unit_softmax(data: Mapping[str, Any]) -> bool:
    """True when the output layer's softmax normalises over a width of 1: a constant 1.0."""
    return data.get("activation") == "softmax" and _int(data, "units") == 1


def single_unit_softmax(record: RunRecord) -> list[Finding]:
    found = []
    seen: set[tuple[int, object]] = set()  # one finding per layer and process, however many fits
    for obs in _observations(record, OUTPUT_CHECK):
        data = obs.data
        if not is_single_unit_softmax(data) or (obs.pid, data.get("layer")) in seen:
            continue
        seen.add((obs.pid, data.get("layer")))
        loss = f" trained with {data['loss']}" if data.get("loss") else ""
        found.append(
            SINGLE_UNIT_SOFTMAX.finding(
                f"The output layer `{data.get('layer')}` ({data.get('layer_class')}) applies softmax "
                f"over 1 unit{loss}: its output is 1.0 for every input and no gradient flows "
                "back through it, so the model cannot learn",
                evidence={
                    "layer": data.get("layer"),
                    "layer_class": data.get("layer_class"),
                    "activation": data.get("activation"),
                    "units": data.get("units"),
                    "loss": data.get("loss"),
                },
                pid=obs.pid,
                rank=obs.rank,
            )
        )
    return found


RULES: tuple[Rule, ...] = (
    sequence_too_short,
    sequence_len_huge,
    history_epochs_mismatch,
    single_unit_softmax,
)
