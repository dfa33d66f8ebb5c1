"""Logs without an exit status (`rules/_helpers/short_logs.py`): fewer epochs/steps than
requested, RUN004 or KER003 by the framework, never both, and neither when another rule owns it."""

from __future__ import annotations

from trainmedic.events import Epoch, Event, GuardObservation, PhaseEnd, RunEnd, Step, TrainingPlan
from trainmedic.findings import Finding
from trainmedic.record import RunRecord
from trainmedic.rules.ker import ker003_history_epochs_mismatch as ker003
from trainmedic.rules.run import run004_silent_early_exit as run004


def record(*events: Event) -> RunRecord:
    return RunRecord.of(events)


def logged_run_ended_early(record: RunRecord) -> list[Finding]:
    """Both codes' rules for a log that holds less than its plan."""
    return run004.logged_run_ended_early(record) + ker003.history_read_short(record)


def epochs(n: int) -> list[Event]:
    return [Epoch(epoch=i, t=float(i)) for i in range(n)]


def test_hf_max_steps_complete_inside_its_last_epoch_is_fine() -> None:
    plan = TrainingPlan(framework="transformers", epochs=61, max_steps=606_667, t=0.0)
    done = [*epochs(60), Step(step=606_667, t=99.0), PhaseEnd(phase="train", t=100.0)]
    assert logged_run_ended_early(record(plan, *done)) == []


def test_hf_stopped_before_max_steps() -> None:
    plan = TrainingPlan(framework="transformers", epochs=3, max_steps=18, t=0.0)
    [finding] = logged_run_ended_early(
        record(plan, *epochs(1), Step(step=6, t=9.0), PhaseEnd(phase="train", t=10.0))
    )
    assert (finding.code, finding.severity.value, finding.step) == ("RUN004", "error", 6)


def test_hf_checkpoint_mid_run_is_not_judged() -> None:
    plan = TrainingPlan(framework="transformers", epochs=3, max_steps=18, t=0.0)
    assert logged_run_ended_early(record(plan, *epochs(1), Step(step=6, t=9.0))) == []


def test_expected_epochs_on_a_log_without_end() -> None:
    plan = TrainingPlan(framework="lightning", epochs=10, t=0.0)
    [finding] = logged_run_ended_early(record(plan, *epochs(6)))
    assert finding.severity.value == "warning"
    assert finding.evidence["epochs_completed"] == 6


def test_steps_aside_for_ker003_run004_and_early_stopping() -> None:
    keras = TrainingPlan(framework="keras", epochs=12, t=0.0)
    fit_end = GuardObservation(check="keras_fit_end", t=4.0, data={"epochs_requested": 12, "epochs_run": 1})
    # seen in-process: KER003's own rule (rules/ker/ker003_history_epochs_mismatch.py) owns it
    assert logged_run_ended_early(record(keras, *epochs(1), fit_end, PhaseEnd(phase="train", t=5.0))) == []
    # a Keras history read from a file: KER003 comes from here, never RUN004
    [from_log] = logged_run_ended_early(record(keras, *epochs(1)))
    assert (from_log.code, from_log.epoch) == ("KER003", 1)
    supervised = TrainingPlan(framework="lightning", epochs=12, t=0.0)
    assert logged_run_ended_early(record(supervised, *epochs(1), RunEnd(exit_code=0, t=5.0))) == []
    stopping = TrainingPlan(framework="lightning", epochs=12, early_stopping=True, t=0.0)
    assert logged_run_ended_early(record(stopping, *epochs(4))) == []
