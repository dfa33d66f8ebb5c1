"""A framework's own logged values as curve points: one `Step` per log call, marked `logged`.

Where the framework already computes and logs values (the HF Trainer's `on_log` every
`logging_steps`, TRL's extra metrics in the same dict, Lightning's logged metrics, Keras'
batch logs), every value it logs is a point of its named curve, at the step it was logged
at. The guards' own step events are read at their checks, a few steps apart; the framework's
log can be denser (a Trainer logging every 2 steps), and it is the curve the user sees on
their console and in their trackers. The writer buckets these events as it buckets the
guard's (`eventlog.steps`), so a run that logs every step keeps a bounded run folder, and the
record picks, per quantity, one curve of the two (`RunRecord.curve_steps`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from trainmedic.events import Step

#: Keys of a log that are no curve of the training: where it stands (its own x), the work done so
#: far, and the speed and duration of a loop (the report measures those from the steps' times).
NOT_A_CURVE = frozenset({"epoch", "step", "total_flos"})
NOT_A_CURVE_SUFFIXES = ("_runtime", "_per_second")
#: `Step.logged` of the values a program printed ("step 100, loss: 0.53"), read by the supervisor
#: from its output (`supervise.metriclines`): a stream of their own, a copy of what a guard or a
#: framework may give too (`RunRecord.curve_steps`).
PRINTED = "printed"


def as_number(value: object) -> float | None:
    """A logged scalar as a float (NaN and Inf kept: a non-finite loss is a finding); None for
    what is no number (a string, a list, a bool, a tensor of several values)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    numel = getattr(value, "numel", None)  # a torch tensor's method; numpy's `size` is a number
    numel = numel() if callable(numel) else getattr(value, "size", None)
    if numel == 1 and callable(getattr(value, "item", None)):
        try:
            number = value.item()  # type: ignore[attr-defined]
        except (TypeError, ValueError, RuntimeError):
            return None
        return float(number) if isinstance(number, (int, float)) and not isinstance(number, bool) else None
    return None


def logged_step(
    framework: str,
    logs: Mapping[str, object],
    *,
    step: int,
    epoch: int | None,
    skip: Collection[str] = (),
) -> Step | None:
    """The step event of one log call: its numeric values by name (less `skip`, the values the
    caller sends otherwise, and what is no curve); None when nothing is left."""
    values: dict[str, float] = {}
    for name, value in logs.items():
        if name in NOT_A_CURVE or name in skip or name.endswith(NOT_A_CURVE_SUFFIXES):
            continue
        number = as_number(value)
        if number is not None:
            values[name] = number
    if not values:
        return None
    return Step(step=step, epoch=epoch, metrics=values, logged=framework)
