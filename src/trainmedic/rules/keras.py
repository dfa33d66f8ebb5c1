"""KER: Keras / TensorFlow input pipeline and fit bookkeeping."""

from __future__ import annotations

from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule

SEQUENCE_TOO_SHORT = FindingSpec(
    code="KER001",
    slug="sequence-too-short",
    severity=Severity.ERROR,
    title="Sequence yields too few batches",
    what=(
        "A keras.utils.Sequence / PyDataset yields far fewer batches per epoch than "
        "samples / batch size (or than steps_per_epoch)."
    ),
    why="Each 'epoch' sees a fraction of the data; training looks stalled or needs many more epochs.",
    example="def __len__(self): return 1   # should be ceil(len(self.x) / self.batch_size)",
    fix="Make __len__ return ceil(n_samples / batch_size), or wrap it in trainmedic.keras.LoopingSequence.",
)

SEQUENCE_LEN_HUGE = FindingSpec(
    code="KER002",
    slug="sequence-len-huge",
    severity=Severity.ERROR,
    title="Sequence length is huge",
    what=(
        "__len__ is huge (e.g. sys.maxsize): with shuffle=True the Keras adapter materialises "
        "the index list and runs out of memory."
    ),
    why="The process fails at once (Keras 3) or grows until the OOM killer ends it.",
    example="def __len__(self): return sys.maxsize  # 'infinite' sequence",
    fix="Use trainmedic.keras.LoopingSequence(seq, multiple=k): a moderate multiple of the real length.",
)

HISTORY_EPOCHS_MISMATCH = FindingSpec(
    code="KER003",
    slug="history-epochs-mismatch",
    severity=Severity.ERROR,
    title="History holds fewer epochs than requested",
    what=(
        "After fit, len(history.history['loss']) differs from the requested epochs, and "
        "EarlyStopping does not explain it."
    ),
    why="fit returned early and quietly: the saved model is undertrained.",
    example="fit(epochs=12) -> history with 1 epoch after 'Your input ran out of data'.",
    fix="Find what ended fit (input exhaustion, stop_training set by a callback) and fix it.",
)

SPECS: tuple[FindingSpec, ...] = (SEQUENCE_TOO_SHORT, SEQUENCE_LEN_HUGE, HISTORY_EPOCHS_MISMATCH)

RULES: tuple[Rule, ...] = ()
