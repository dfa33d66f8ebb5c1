"""RUN004 `silent-early-exit`: exit status 0 after fewer epochs than were requested.

Collector: the supervisor (`trainmedic run`) sends the last attempt's `RunEnd` (status 0),
`--expect-epochs` in its `RunStart`, and the trainer's log lines; the in-process integrations
(Keras, the HF and Lightning callbacks) send a `TrainingPlan` (epochs requested, an
early-stopping callback) and `Epoch` events. Without them the log's 'Epoch k/N' lines count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event
from trainmedic.evidence import logtext as _logtext
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.attempts import LAST_LINES, attempts
from trainmedic.rules._helpers.run_examples import log_lines, supervised_run
from trainmedic.rules._helpers.short_logs import short_log


def _example() -> list[Event]:
    """fit(epochs=12) logs 'Epoch 1/12' and returns; the process exits 0."""
    return supervised_run(*log_lines("Epoch 1/12", "500/500 - 3s - loss: 0.4102"), exit_code=0)


SPEC = FindingSpec(
    code="RUN004",
    slug="silent-early-exit",
    severity=Severity.ERROR,
    title="Exit 0 after fewer epochs than requested",
    what=(
        "The run exited with status 0 but fewer epochs (or steps) ran than were requested, "
        "and no early-stopping callback explains it. Requested: --expect-epochs, the framework's "
        "training plan, or the N of 'Epoch k/N' log lines; completed: epoch events or the highest k."
    ),
    why="The job looks successful to the scheduler; the model is undertrained.",
    example="model.fit(ds, epochs=12, steps_per_epoch=500) returns after epoch 1, exit 0.",
    fix="Find what stopped the loop (input exhausted, a callback setting stop_training) and fix it.",
    decided_in=("run events",),
    example_input=_example,
)


# -- the decision ---------------------------------------------------------------------------
def silent_early_exit(record: RunRecord) -> list[Finding]:
    """The last attempt exited 0 with no stop requested, fewer epochs than requested ran, and
    neither a plan's early-stopping callback nor its log line explains it."""
    views = attempts(record)
    if not views or views[-1].end.exit_code != 0 or views[-1].stops:
        return []
    lines = [e.text for e in record.log_lines]
    from_log = _logtext.epoch_progress(lines)
    requested = record.epochs_requested or (from_log[1] if from_log else None)
    completed = record.epochs_completed or (from_log[0] if from_log else 0)
    if requested is None or completed >= requested:
        return []
    if any(p.early_stopping for p in record.plans) or _logtext.first_match(_logtext.EARLY_STOPPING, lines):
        return []
    evidence = {
        "epochs_requested": requested,
        "epochs_completed": completed,
        "completed_from": "epoch events" if record.epochs_completed else "log lines ('Epoch k/N')",
        "expect_epochs_option": record.start.expect_epochs if record.start else None,
        "last_log_lines": lines[-LAST_LINES:],
    }
    return [SPEC.finding(message(evidence), evidence=evidence, epoch=completed)]


def logged_run_ended_early(record: RunRecord) -> list[Finding]:
    """RUN004 for logs without an exit status (`trainmedic diagnose`): the plan asked for more
    than the log holds; `_helpers/short_logs.py` measures it and steps aside for KER003."""
    short = short_log(record)
    return [judge_logged(short.evidence)] if short is not None and not short.keras else []


RULES: tuple[Rule, ...] = (silent_early_exit, logged_run_ended_early)


# -- the wording ----------------------------------------------------------------------------
def message(evidence: Mapping[str, Any]) -> str:
    return (
        f"Exited with status 0 after {evidence['epochs_completed']} of "
        f"{evidence['epochs_requested']} requested epochs"
    )


_LOGGED_FIX = (
    "Find what ended training early (a callback setting should_training_stop / stop_training, an "
    "exhausted iterator, a max_time limit, a kill) and fix it; if early stopping was intended, "
    "pass --early-stopping."
)


def judge_logged(evidence: Mapping[str, Any]) -> Finding:
    """RUN004 for a log of another framework than Keras that holds less than its plan: steps
    against `max_steps` (HF: `train()` returned), else epochs against the epochs requested."""
    requested, completed = evidence["epochs_requested"], evidence["epochs_completed"]
    if "max_steps" in evidence:
        of_epochs = f" (epoch {completed} of {requested})" if requested else ""
        message = (
            f"Training returned at step {evidence['steps_completed']} of the {evidence['max_steps']} "
            f"planned{of_epochs}, and no early-stopping callback was registered"
        )
        return SPEC.finding(message, evidence=evidence, fix=_LOGGED_FIX, step=evidence["steps_completed"])
    finished = evidence["training_loop_returned"]
    ended = (
        "the log shows the training loop returning" if finished else "the log does not say how the run ended"
    )
    message = f"The log holds {completed} of the {requested} epochs requested; {ended}"
    severity = Severity.ERROR if finished else Severity.WARNING
    return SPEC.finding(message, evidence=evidence, fix=_LOGGED_FIX, severity=severity)
