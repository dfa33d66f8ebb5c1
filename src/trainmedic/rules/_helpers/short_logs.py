"""Fewer epochs or steps in a log than were requested (`trainmedic diagnose` on existing logs).

The same fact has an owner in two families, and the log-only case steps aside for both, so
one run never gets two findings for it:

- a supervised run (a `RunEnd` event) is judged by RUN004's `silent_early_exit`, which
  knows the exit status;
- a Keras fit seen in-process (a `keras_fit_end` observation) is judged by KER003's
  `history_epochs_mismatch`.

What is left is classified here, and each code's file words its own: a Keras history read
from a file with `--expect-epochs` is KER003's (`ker003.judge_logged`: the log has no
in-process observation for that rule to read); logs of other frameworks, where only the log
is known (an HF `trainer_state.json` whose `train()` returned at step 6 of `max_steps` 18, a
Lightning / TensorBoard log with fewer epochs than `--expect-epochs`), are RUN004's
(`run004.judge_logged`): an error when the log itself shows the training loop returning, a
warning when it does not say how the run ended (it may have been killed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainmedic.events import GuardObservation, PhaseEnd, TrainingPlan
from trainmedic.record import RunRecord

#: Plans of these frameworks belong to KER003.
KERAS_FRAMEWORKS = frozenset({"keras", "tf.keras", "tf_keras", "tensorflow"})


@dataclass(frozen=True, slots=True)
class ShortLog:
    """A log without an exit status that holds less than its plan asked for.

    `keras`: a Keras history read from a file (KER003's); else RUN004's. `evidence` is what
    was measured: steps against `max_steps` (`steps_completed`, `max_steps`, ...) or epochs
    against the epochs requested (`epochs_completed`, `epochs_requested`, `framework`, ...),
    with `training_loop_returned` and `early_stopping`.
    """

    keras: bool
    evidence: dict[str, Any]


def short_log(record: RunRecord) -> ShortLog | None:
    """The shortfall of a logged run that no other rule judges, if any."""
    if record.end is not None or not record.plans:
        return None
    plans = record.plans
    if any(p.early_stopping for p in plans):
        return None
    if any(p.framework in KERAS_FRAMEWORKS for p in plans):
        in_process = any(
            isinstance(e, GuardObservation) and e.check == "keras_fit_end" for e in record.events
        )
        return None if in_process else _epochs_short(record, plans[-1].framework, True)
    finished = any(isinstance(e, PhaseEnd) and e.phase == "train" for e in record.events)
    found = _steps_short(record, plans, finished)
    # With max_steps known (HF), steps decide: its num_train_epochs is ceil(max_steps / steps per
    # epoch), so a complete run often ends inside its last "epoch". Epochs decide only when they
    # were stated on their own (--expect-epochs, a Keras-style plan).
    stated_epochs = any(p.epochs and not p.max_steps for p in plans)
    if found is None and (stated_epochs or not any(p.max_steps for p in plans)):
        found = _epochs_short(record, plans[-1].framework, finished)
    return found


def _steps_short(record: RunRecord, plans: list[TrainingPlan], finished: bool) -> ShortLog | None:
    """HF: `train()` returned (its summary entry is logged) before `max_steps`."""
    max_steps = next((p.max_steps for p in reversed(plans) if p.max_steps), None)
    if max_steps is None or not finished or not record.steps:
        return None
    reached = max(s.step for s in record.steps)
    if reached >= max_steps:
        return None
    evidence = {
        "steps_completed": reached,
        "max_steps": max_steps,
        "epochs_completed": record.epochs_completed,
        "epochs_requested": record.epochs_requested,
        "training_loop_returned": True,
        "early_stopping": False,
    }
    return ShortLog(False, evidence)


def _epochs_short(record: RunRecord, framework: str, finished: bool) -> ShortLog | None:
    """Fewer epochs logged than requested: KER003's for a Keras history (fit returned), else RUN004's."""
    requested = record.epochs_requested
    completed = record.epochs_completed
    if not requested or completed >= requested:
        return None
    evidence = {
        "epochs_completed": completed,
        "epochs_requested": requested,
        "framework": framework,
        "training_loop_returned": finished,
        "early_stopping": False,
    }
    return ShortLog(framework in KERAS_FRAMEWORKS, evidence)
