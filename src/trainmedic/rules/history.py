"""Fewer epochs or steps in a log than were requested (`trainmedic diagnose` on existing logs).

The same fact has an owner in two other families, and this rule steps aside for
both, so one run never gets two findings for it:

- a supervised run (a `RunEnd` event) is judged by RUN004 in `rules/run/exits.py`, which
  knows the exit status;
- a Keras fit seen in-process (a `keras_fit_end` observation) is judged by KER003's
  rule in `rules/keras.py`.

A Keras history read from a file with `--expect-epochs` gets KER003 here (the log
has no in-process observation for that rule to read). What is left are logs of
other frameworks, where only the log is known: an HF
`trainer_state.json` whose `train()` returned at step 6 of `max_steps` 18, or a
Lightning / TensorBoard log with fewer epochs than `--expect-epochs`. They are
reported under RUN004's code (`silent-early-exit`): an error when the log itself
shows the training loop returning, a warning when it does not say how the run
ended (it may have been killed).
"""

from __future__ import annotations

from trainmedic.events import GuardObservation, PhaseEnd, TrainingPlan
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules.keras import HISTORY_EPOCHS_MISMATCH
from trainmedic.rules.run import SILENT_EARLY_EXIT

#: Plans of these frameworks belong to KER003 (rules/keras.py).
KERAS_FRAMEWORKS = frozenset({"keras", "tf.keras", "tf_keras", "tensorflow"})


def logged_run_ended_early(record: RunRecord) -> list[Finding]:
    """RUN004 for logs without an exit status: the plan asked for more than the log holds."""
    if record.end is not None or not record.plans:
        return []
    plans = record.plans
    if any(p.early_stopping for p in plans):
        return []
    if any(p.framework in KERAS_FRAMEWORKS for p in plans):
        in_process = any(
            isinstance(e, GuardObservation) and e.check == "keras_fit_end" for e in record.events
        )
        found_keras = None if in_process else _epochs_short(record, plans[-1].framework, True)
        return [found_keras] if found_keras is not None else []
    finished = any(isinstance(e, PhaseEnd) and e.phase == "train" for e in record.events)
    found = _steps_short(record, plans, finished)
    # With max_steps known (HF), steps decide: its num_train_epochs is ceil(max_steps / steps per
    # epoch), so a complete run often ends inside its last "epoch". Epochs decide only when they
    # were stated on their own (--expect-epochs, a Keras-style plan).
    stated_epochs = any(p.epochs and not p.max_steps for p in plans)
    if found is None and (stated_epochs or not any(p.max_steps for p in plans)):
        found = _epochs_short(record, plans[-1].framework, finished)
    return [found] if found is not None else []


def _steps_short(record: RunRecord, plans: list[TrainingPlan], finished: bool) -> Finding | None:
    """HF: `train()` returned (its summary entry is logged) before `max_steps`."""
    max_steps = next((p.max_steps for p in reversed(plans) if p.max_steps), None)
    if max_steps is None or not finished or not record.steps:
        return None
    reached = max(s.step for s in record.steps)
    if reached >= max_steps:
        return None
    requested = record.epochs_requested
    completed = record.epochs_completed
    of_epochs = f" (epoch {completed} of {requested})" if requested else ""
    evidence = {
        "steps_completed": reached,
        "max_steps": max_steps,
        "epochs_completed": completed,
        "epochs_requested": requested,
        "training_loop_returned": True,
        "early_stopping": False,
    }
    message = (
        f"Training returned at step {reached} of the {max_steps} planned{of_epochs}, "
        "and no early-stopping callback was registered"
    )
    return SILENT_EARLY_EXIT.finding(message, evidence=evidence, fix=_FIX, step=reached)


def _epochs_short(record: RunRecord, framework: str, finished: bool) -> Finding | None:
    """Fewer epochs logged than requested: KER003 for a Keras history (fit returned), else RUN004."""
    keras = framework in KERAS_FRAMEWORKS
    spec: FindingSpec = HISTORY_EPOCHS_MISMATCH if keras else SILENT_EARLY_EXIT
    requested = record.epochs_requested
    completed = record.epochs_completed
    if not requested or completed >= requested:
        return None
    ended = (
        "the log shows the training loop returning" if finished else "the log does not say how the run ended"
    )
    evidence = {
        "epochs_completed": completed,
        "epochs_requested": requested,
        "framework": framework,
        "training_loop_returned": finished,
        "early_stopping": False,
    }
    if keras:  # a saved history exists only once fit returned
        message = f"The history holds {completed} of the {requested} epochs requested"
        return spec.finding(message, evidence=evidence, epoch=completed)
    message = f"The log holds {completed} of the {requested} epochs requested; {ended}"
    severity = Severity.ERROR if finished else Severity.WARNING
    return spec.finding(message, evidence=evidence, fix=_FIX, severity=severity)


_FIX = (
    "Find what ended training early (a callback setting should_training_stop / stop_training, an "
    "exhausted iterator, a max_time limit, a kill) and fix it; if early stopping was intended, "
    "pass --early-stopping."
)

RULES: tuple[Rule, ...] = (logged_run_ended_early,)
