"""KER003 `history-epochs-mismatch`: fit returned with fewer epochs than requested.

Collector: the Keras integration's fit recorder (`trainmedic.keras._recorder`) observes
`keras_fit_end` when fit returns (`epochs_requested`, `epochs_run`, `initial_epoch`,
`completed`, `stopped_by`, `early_stopping`, `steps_per_epoch`); the fit's `keras_input`
observation and its `Epoch` events (with the batches each epoch ran) tell an input that
ran out. For a Keras history read from a file, `_helpers/short_logs.py` measures what the
log holds and `history_read_short` calls `judge_logged`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Epoch, Event, GuardObservation
from trainmedic.evidence.observations import KERAS_INPUT
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.keras import epochs_after, fit_input, integer, observations
from trainmedic.rules._helpers.short_logs import short_log

#: The fit recorder's observation when fit returns.
OBSERVATION = "keras_fit_end"


def _example() -> list[Event]:
    """Legacy tf.keras: fit(ds, epochs=3, steps_per_epoch=10) over 4 batches returns after 1 epoch."""
    return [
        *fit_input(sequence_len=4, samples=64, batch_size=16, steps_per_epoch=10, is_sequence=False),
        Epoch(t=2.0, pid=100, epoch=0, steps=4),
        GuardObservation(
            t=3.0,
            pid=100,
            check=OBSERVATION,
            data={"epochs_requested": 3, "epochs_run": 1, "completed": True, "steps_per_epoch": 10},
        ),
    ]


SPEC = FindingSpec(
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
    decided_in=("run events",),
    example_input=_example,
)

_NO_EPOCH_FIX = (
    "Pass epochs=initial_epoch + the epochs to train (the fine-tuning guide: "
    "epochs=initial_epochs + fine_tune_epochs, initial_epoch=history.epoch[-1])."
)


def message(evidence: Mapping[str, Any]) -> str:
    if "epochs_completed" in evidence:  # a history read from a file (`judge_logged`)
        return (
            f"The history holds {evidence['epochs_completed']} of the {evidence['epochs_requested']} "
            "epochs requested"
        )
    if "epochs" in evidence:  # fit(epochs=5, initial_epoch=5): nothing to run
        return (
            f"fit(epochs={evidence['epochs']}, initial_epoch={evidence['initial_epoch']}) ran no epoch: "
            "Keras' `epochs` is the index to stop at, not a number of epochs to add (expected only "
            "when a resumed run had already finished)"
        )
    cause = (
        f"; its last epoch ran {evidence['last_epoch_steps']} of {evidence['steps_per_epoch']} steps "
        "(input ran out)"
        if evidence["input_exhausted"]
        else ""
    )
    return (
        f"fit returned after {evidence['epochs_run']} of {evidence['epochs_requested']} epochs, and no "
        f"EarlyStopping or stop_training explains it{cause}"
    )


def history_epochs_mismatch(record: RunRecord) -> list[Finding]:
    found = []
    inputs = observations(record, KERAS_INPUT)
    for end in observations(record, OBSERVATION):
        data = end.data
        requested, ran = integer(data, "epochs_requested"), integer(data, "epochs_run")
        initial = integer(data, "initial_epoch") or 0
        if data.get("completed") and requested is not None and requested <= 0 < initial and ran == 0:
            found.append(_no_epoch_to_run(end, requested + initial, initial))
            continue
        if not data.get("completed") or requested is None or ran is None or ran >= requested:
            continue
        if data.get("stopped_by"):
            continue
        begun = [o for o in inputs if o.pid == end.pid and o.t <= end.t]
        epochs = epochs_after(record, begun[-1]) if begun else []
        steps = integer(begun[-1].data, "steps_per_epoch") if begun else None
        steps = integer(data, "steps_per_epoch") or steps
        last_steps = epochs[-1].steps if epochs else None
        evidence = {
            "epochs_requested": requested,
            "epochs_run": ran,
            "initial_epoch": data.get("initial_epoch", 0),
            "steps_per_epoch": steps,
            "last_epoch_steps": last_steps,
            "input_exhausted": steps is not None and last_steps is not None and last_steps < steps,
            "early_stopping": data.get("early_stopping", False),
        }
        found.append(
            SPEC.finding(message(evidence), evidence=evidence, pid=end.pid, rank=end.rank, epoch=ran)
        )
    return found


def judge_logged(evidence: Mapping[str, Any]) -> Finding:
    """KER003 for a Keras history read from a file that holds fewer epochs than requested.

    `_helpers/short_logs.py` measures it (`epochs_completed`, `epochs_requested`, `framework`,
    `training_loop_returned`, `early_stopping`): a saved history exists only once fit returned.
    """
    return SPEC.finding(message(evidence), evidence=evidence, epoch=evidence["epochs_completed"])


def _no_epoch_to_run(end: GuardObservation, epochs: int, initial: int) -> Finding:
    """fit(epochs=5, initial_epoch=5): Keras' `epochs` is the epoch to stop before, not a count
    to add, so a continued fit given the count of its new epochs trains nothing."""
    evidence = {"epochs": epochs, "initial_epoch": initial, "epochs_run": 0}
    return SPEC.finding(
        message(evidence),
        evidence=evidence,
        fix=_NO_EPOCH_FIX,
        severity=Severity.WARNING,
        pid=end.pid,
        rank=end.rank,
    )


def history_read_short(record: RunRecord) -> list[Finding]:
    """KER003 for a Keras history read from a file (no `keras_fit_end` observation to read)."""
    short = short_log(record)
    return [judge_logged(short.evidence)] if short is not None and short.keras else []


RULES: tuple[Rule, ...] = (history_epochs_mismatch, history_read_short)
