"""A framework's logged values (`Step.logged`) beside the guard's measured steps: bucketed as a
stream of their own (the run folder stays bounded), and one curve per quantity when read back."""

from __future__ import annotations

from trainmedic.eventlog.steps import CurveLog
from trainmedic.events import Event, Step, decode, encode
from trainmedic.logged import as_number, logged_step
from trainmedic.record import RunRecord


def _written(events: list[Event], points: int) -> list[Event]:
    log = CurveLog(points=points)
    out = [e for event in events for e in log.feed(event)]
    return out + log.flush(end=True)


def test_logged_values_are_bucketed_beside_the_guards_steps() -> None:
    """A loop logging every step for 20,000 steps while the guard sends a window every 10:
    the two streams of one process do not cut each other's buckets (a logged step at the
    guard's step is no restart), and each stays bounded."""
    events: list[Event] = []
    for step in range(1, 20_001):
        events.append(Step(t=float(step), pid=1, step=step, metrics={"loss": 1.0}, logged="transformers"))
        if step % 10 == 0:
            events.append(Step(t=step + 0.5, pid=1, step=step, metrics={"loss": 1.0}, duration_s=0.1))
    written = _written(events, points=100)
    logged = [e for e in written if isinstance(e, Step) and e.logged]
    measured = [e for e in written if isinstance(e, Step) and not e.logged]
    assert 100 < len(logged) < 1_500  # not 20,000 lines: about 2x100 + 100 per doubling
    assert 50 < len(measured) < 1_000
    assert sum((e.summary or {}).get("events", 1) for e in logged) == 20_000  # every step counted once
    assert sum((e.summary or {}).get("events", 1) for e in measured) == 2_000
    assert all(e.logged == "transformers" for e in logged)
    record = RunRecord.of(written)
    assert record.steps_run == 20_000
    assert {s.logged for s in record.logged_steps} == {"transformers"}
    assert all(s.logged is None for s in record.steps)


def test_one_curve_per_quantity_the_denser_the_logs_on_a_tie() -> None:
    guard = [Step(t=float(s), pid=1, step=s, metrics={"loss": 9.0, "lr": 0.1}) for s in (1, 10, 20, 24)]
    trainer = [
        Step(t=s + 0.1, pid=1, step=s, metrics={"loss": 1.0, "grad_norm": 2.0}, logged="transformers")
        for s in range(2, 25, 2)
    ]
    record = RunRecord.of(guard + trainer)
    points = {name: [s.step for s in record.curve_steps if name in s.metrics] for name in ("loss", "lr")}
    # the Trainer's 12, not the guard's 4 beside them; the guard's first window (step 1, the
    # untrained model's loss, before the Trainer's first log: a mean over steps 1-2) heads them
    assert points["loss"] == [1, *range(2, 25, 2)]
    assert points["lr"] == [1, 10, 20, 24]  # a quantity only the guard measures stays
    assert record.metric_series("loss") == [(1, 9.0)] + [(s, 1.0) for s in range(2, 25, 2)]
    assert record.steps_run == 24
    # a framework that logs more rarely than the guard reads (HF's default every 500 steps on a
    # short run) leaves the loss to the guard's windows
    sparse = RunRecord.of([*guard, Step(t=30.0, pid=1, step=24, metrics={"loss": 1.0}, logged="keras")])
    assert [s.step for s in sparse.curve_steps if "loss" in s.metrics] == [1, 10, 20, 24]
    assert all(s.metrics["loss"] == 9.0 for s in sparse.curve_steps if "loss" in s.metrics)


def test_a_logged_step_round_trips_and_a_measured_one_has_no_field() -> None:
    logged = Step(t=1.0, pid=1, step=4, metrics={"loss": 2.0}, logged="lightning")
    assert decode(encode(logged)) == logged
    assert "logged" not in encode(Step(t=1.0, pid=1, step=4))


def test_a_log_call_keeps_its_numbers_nan_included_and_no_speed() -> None:
    import numpy as np

    logs = {
        "loss": float("nan"), "grad_norm": np.array(3.0), "acc": np.float32(0.5), "epoch": 0.5,
        "train_runtime": 2.0, "eval_steps_per_second": 4.0, "flag": True, "name": "x", "eval_loss": 1.0,
        "vector": np.ones(3),
    }  # fmt: skip
    step = logged_step("transformers", logs, step=7, epoch=0, skip={"eval_loss"})
    assert step is not None
    assert set(step.metrics) == {"loss", "grad_norm", "acc"}
    assert step.metrics["grad_norm"] == 3.0
    assert step.metrics["loss"] != step.metrics["loss"]  # NaN kept: a non-finite loss is a finding
    assert (step.step, step.epoch, step.logged) == (7, 0, "transformers")
    assert logged_step("keras", {"epoch": 1.0, "name": "x"}, step=1, epoch=0) is None
    assert as_number(np.array([1.0, 2.0])) is None
