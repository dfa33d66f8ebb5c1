"""RUN005 `input-exhausted`: the input pipeline ran out of data before the planned steps.

Collector: the supervisor (`trainmedic run`) relays the framework's own line ('Your input ran
out of data', `OutOfRangeError`: kept as a `LogLine` however chatty the run, see
`evidence.logtext`); the in-process integrations (Keras) send each fit's `TrainingPlan`
(steps per epoch, epochs) and the steps each `Epoch` really ran.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

from trainmedic.events import Epoch, Event, TrainingPlan
from trainmedic.evidence import logtext as _logtext
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.run_examples import log_lines, supervised_run


def _example() -> list[Event]:
    """Keras' warning when a dataset of 100 batches meets steps_per_epoch=500."""
    warning = (
        "UserWarning: Your input ran out of data; interrupting training. Make sure that your "
        "dataset or generator can generate at least `steps_per_epoch * epochs` batches."
    )
    return supervised_run(*log_lines("Epoch 1/10", warning, stream="stderr"), exit_code=0)


SPEC = FindingSpec(
    code="RUN005",
    slug="input-exhausted",
    severity=Severity.ERROR,
    title="Input pipeline ran out of data",
    what=(
        "The input pipeline ran out of data ('Your input ran out of data', StopIteration, "
        "OutOfRangeError): fewer batches than steps_per_epoch x epochs."
    ),
    why=(
        "Legacy tf.keras stops training after the first epoch; Keras 3 silently runs fewer "
        "steps per epoch. Either way the model sees less data than planned."
    ),
    example=(
        "ds = tf.data.Dataset.from_tensor_slices(...).batch(32)  # 100 batches\n"
        "model.fit(ds, epochs=10, steps_per_epoch=500)"
    ),
    fix=(
        "Repeat the dataset (ds.repeat()), wrap the Sequence in trainmedic.keras.LoopingSequence, "
        "or set steps_per_epoch to the number of batches the input really has."
    ),
    decided_in=("run events",),
    example_input=_example,
)


# -- the decision ---------------------------------------------------------------------------
def input_exhausted(record: RunRecord) -> list[Finding]:
    """The framework's line, or epochs that ran fewer steps than their plan. When the training
    ran all its epochs in full, the input that ran out was another one (the validation data):
    a warning."""
    line = _logtext.first_match(_logtext.INPUT_EXHAUSTED, [e.text for e in record.log_lines])
    short, planned = _short_epochs(record)
    if line is None and not short:
        return []
    evidence: dict[str, object] = {"log_line": line.strip() if line else None, "steps_per_epoch": planned}
    if short:
        evidence["short_epochs"] = [{"epoch": epoch_number(ep), "steps": st} for ep, st in short]
        return [SPEC.finding(message(evidence), evidence=evidence, epoch=epoch_number(short[0][0]))]
    full = _last_fit_in_full(record)
    if full is not None:
        evidence["full_epochs"] = full
        return [
            SPEC.finding(message(evidence), evidence=evidence, severity=Severity.WARNING, fix=fix(evidence))
        ]
    return [SPEC.finding(message(evidence), evidence=evidence)]


def _short_epochs(record: RunRecord) -> tuple[list[tuple[int, int]], int | None]:
    """(epoch, steps) of the epochs that ran fewer steps than the plan they ran under, and that
    plan's steps per epoch (the first short epoch's; else the last plan's).

    Each epoch is judged by the last plan its process announced before it: one process may fit
    several times with different steps per epoch (a head trained on one set, then fine-tuned
    on another at another batch size), and each fit's epochs are full by its own plan.
    """
    plans: dict[int, int] = {}
    short: list[tuple[int, int]] = []
    planned: int | None = None
    for event in record.events:
        if isinstance(event, TrainingPlan) and event.steps_per_epoch:
            plans[event.pid] = event.steps_per_epoch
        elif isinstance(event, Epoch) and event.steps is not None and event.steps < plans.get(event.pid, 0):
            short.append((event.epoch, event.steps))
            planned = plans[event.pid] if planned is None else planned
    if planned is None and plans:
        planned = next(reversed(plans.values()))
    return short, planned


def _last_fit_in_full(record: RunRecord) -> int | None:
    """The epochs of the last planned fit, when it reached its last planned epoch and every one
    of them ran its planned steps (the training input never ran out); None otherwise."""
    plans = [p for p in record.plans if p.steps_per_epoch and p.epochs]
    if not plans:
        return None
    plan = plans[-1]
    steps, epochs = plan.steps_per_epoch or 0, plan.epochs or 0
    ran = [e for e in record.of_type(Epoch) if e.t >= plan.t and e.pid == plan.pid]
    if not ran or ran[-1].epoch != epochs - 1:
        return None
    return len(ran) if all(e.steps is not None and e.steps >= steps for e in ran) else None


RULES: tuple[Rule, ...] = (input_exhausted,)


# -- the wording ----------------------------------------------------------------------------
def message(evidence: Mapping[str, Any]) -> str:
    line = evidence.get("log_line")
    said = _quoted(line) if line is not None else ""
    planned = evidence.get("steps_per_epoch")
    short = evidence.get("short_epochs")
    if short:
        message = (
            f"The input ran out of data: {len(short)} epoch(s) ran fewer than the {planned} planned "
            f"steps (epoch {short[0]['epoch']}: {short[0]['steps']} steps)"
        )
        return message + (f"; the log says: {said}" if said else "")
    if "full_epochs" in evidence:
        return (
            f"An input ran out of data ({said}), but the training ran all its {evidence['full_epochs']} "
            f"epochs of {planned} planned steps: it was another input, most likely the validation data "
            "(validation_steps more than its batches: each evaluation stopped at its end)"
        )
    return f"The input ran out of data: {said}"


def fix(evidence: Mapping[str, Any]) -> str:
    if "full_epochs" in evidence:  # the validation data ran out, not the training's
        return (
            "Leave validation_steps unset (Keras then evaluates the whole validation set each epoch), "
            "or set it to the number of validation batches."
        )
    return SPEC.fix


def _quoted(line: str) -> str:
    """The framework's own words from the matched line: no file prefix, its first sentence."""
    match = _logtext.INPUT_EXHAUSTED.search(line)
    words = line[match.start() :] if match else line
    sentence = words.split(". ", 1)[0].rstrip(".")
    return textwrap.shorten(sentence.strip(), width=160, placeholder=" ...")
