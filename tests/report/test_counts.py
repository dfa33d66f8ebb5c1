"""The report's counts are the trainer's: steps from the step numbers (the PyTorch guard sends
one event per window of steps, the writer merges long runs into buckets), the rate between step
events with the start-up before the first apart, and no epoch count for a loop without epochs."""

from __future__ import annotations

import pytest

from trainmedic.events import Epoch, Event, RunStart, Step
from trainmedic.record import RunRecord, run_counts, steps_per_second
from trainmedic.report._html_plots import throughput_section
from trainmedic.report._html_sections import ending_section, outcome


def _guard_windows(pid: int, last: int, *, t0: float, start_up: float, step_s: float) -> list[Event]:
    """The guard's events of a loop: one per 10 steps and one at the last, the first window's
    time holding the process's start-up."""
    ends = [*range(10, last, 10), last]
    return [Step(t=t0 + start_up + step * step_s, pid=pid, step=step, duration_s=step_s) for step in ends]


def _stat(html: str, label: str) -> str:
    value = html.split(f"</b><span>{label}</span>", maxsplit=1)[0]
    return value.rsplit("<b>", 1)[1]


def test_a_24_step_run_is_24_steps_at_its_own_rate() -> None:
    events: list[Event] = [RunStart(t=100.0, pid=1, command=["python", "sft.py"])]
    events += _guard_windows(7, 24, t0=100.0, start_up=15.0, step_s=0.4)
    record = RunRecord.of(events)
    assert record.steps_run == 24
    assert steps_per_second(record.steps) == pytest.approx(2.5)  # 14 steps in 5.6 s, start-up apart
    page = ending_section(record, [], outcome(record, []))
    assert _stat(page, "steps") == "24"
    assert _stat(page, "epochs") == "-"  # a loop that reports no epochs
    throughput = throughput_section(record)
    assert _stat(throughput, "steps / s") == "2.5"
    assert _stat(throughput, "start-up, to step 10") == "19.0 s"


def test_restarted_numbering_adds_up_and_ranks_count_once() -> None:
    events: list[Event] = []
    for rank in (0, 1):
        events += [Step(t=float(i), pid=10 + rank, rank=rank, step=i) for i in range(1, 301)]
        events += [Step(t=400.0 + i, pid=20 + rank, rank=rank, step=i) for i in range(1, 51)]
    events.append(Epoch(t=500.0, pid=10, rank=0, epoch=0, steps=300))
    record = RunRecord.of(events)
    assert record.steps_run == 350  # 300, then a fresh training of 50; two ranks of the same steps
    assert _stat(ending_section(record, [], outcome(record, [])), "epochs") == "1"


def test_the_terminal_gives_the_same_counts() -> None:
    from trainmedic.cli.run_cmd import counts_line

    events: list[Event] = [RunStart(t=100.0, pid=1, command=["python", "sft.py"])]
    events += _guard_windows(7, 24, t0=100.0, start_up=15.0, step_s=0.4)
    counts = run_counts(RunRecord.of(events))
    assert counts["steps"] == 24
    assert counts["epochs"] is None
    assert counts["steps_per_s"] == pytest.approx(2.5)
    assert counts["start_up_s"] == pytest.approx(19.0)
    assert counts_line(counts) == "24 steps · 2.5 steps/s after step 10 (start-up 19.0 s)"
    epochs = [*events, Epoch(t=200.0, pid=7, epoch=0, steps=24)]
    assert counts_line(run_counts(RunRecord.of(epochs))).startswith("24 steps · 1 epoch · 2.5 steps/s")
    assert counts_line(run_counts(RunRecord.of(events[:1]))) == ""
