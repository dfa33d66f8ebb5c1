"""Events: every type round-trips; a file cut mid-line or by SIGKILL stays readable."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
import textwrap
from dataclasses import fields
from pathlib import Path

import pytest

from trainmedic.eventlog.reader import read_events
from trainmedic.eventlog.writer import EventWriter
from trainmedic.events import (
    EVENT_TYPES,
    Epoch,
    MemorySample,
    PhaseEnd,
    PhaseStart,
    RunStart,
    Step,
    TrainingPlan,
    UnknownEvent,
    decode,
    encode,
)
from trainmedic.record import RunRecord

REQUIRED = {
    "run_start": {"command": ["python", "train.py"]},
    "run_end": {"exit_code": 137, "signal": 9},
    "phase_start": {"phase": "eval", "epoch": 2},
    "phase_end": {"phase": "eval", "epoch": 2},
    "training_plan": {"framework": "keras", "epochs": 12},
    "step": {"step": 5, "metrics": {"loss": 0.5}},
    "epoch": {"epoch": 1, "metrics": {"loss": 0.4}},
    "metric": {"name": "loss", "value": 0.3},
    "memory": {"rss_bytes": 1 << 30, "processes": {"12": 1 << 30}},
    "guard": {"check": "grad_norm", "data": {"value": 3.0}},
    "finding": {"finding": {"code": "RUN001"}},
    "memory_limit": {"limit_bytes": 1 << 30},
    "oom_kill": {"count": 1},
    "stop_request": {"signal": 15},
    "hang": {"idle_s": 30.0, "cpu_percent": 0.0},
}


@pytest.mark.parametrize("kind", sorted(EVENT_TYPES))
def test_every_event_type_round_trips(kind: str) -> None:
    cls = EVENT_TYPES[kind]
    event = cls(rank=1, node="n0", **REQUIRED.get(kind, {}))
    back = decode(encode(event))
    assert type(back) is cls
    assert {f.name: getattr(back, f.name) for f in fields(back)} == {
        f.name: getattr(event, f.name) for f in fields(event)
    }


@pytest.mark.parametrize("kind", sorted(EVENT_TYPES))
def test_every_event_type_compares_and_prints_by_its_own_fields(kind: str) -> None:
    cls = EVENT_TYPES[kind]
    event = cls(t=1.0, pid=7, rank=1, node="n0", **REQUIRED.get(kind, {}))
    same = cls(t=1.0, pid=7, rank=1, node="n0", **REQUIRED.get(kind, {}))
    assert event == same
    assert event != cls(t=1.0, pid=8, rank=1, node="n0", **REQUIRED.get(kind, {}))
    assert repr(event).startswith(f"{cls.__name__}(t=1.0, pid=7, rank=1, node='n0'")
    for name, value in REQUIRED.get(kind, {}).items():  # the type's own fields count too
        assert f"{name}={value!r}" in repr(event)
        changed = cls(t=1.0, pid=7, rank=1, node="n0", **{**REQUIRED.get(kind, {}), name: None})
        assert event != changed
    with pytest.raises(TypeError):
        hash(event)  # mutable records


def test_events_of_different_types_are_never_equal() -> None:
    assert Epoch(epoch=1, t=1.0, pid=1) != Step(step=1, t=1.0, pid=1)


def test_nonfinite_metrics_survive() -> None:
    back = decode(encode(Step(step=1, metrics={"loss": math.nan, "gn": math.inf})))
    assert isinstance(back, Step)
    assert math.isnan(back.metrics["loss"])
    assert back.metrics["gn"] == math.inf


def test_unknown_event_kind_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"kind":"from_the_future","t":1.0,"pid":3,"x":1}\n' + encode(Epoch(epoch=0)) + "\n")
    events = read_events(path).events
    assert isinstance(events[0], UnknownEvent)
    assert events[0].original_kind == "from_the_future"
    assert events[0].payload == {"x": 1}
    assert isinstance(events[1], Epoch)


def test_file_cut_mid_line_is_read_up_to_the_cut(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with EventWriter(path) as writer:
        for i in range(5):
            writer.emit(Step(step=i))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 7])  # cut inside the last line
    result = read_events(path)
    assert [e.step for e in result.events if isinstance(e, Step)] == [0, 1, 2, 3]
    assert result.truncated_tail
    assert result.skipped_lines == []


def test_garbage_line_in_the_middle_is_skipped_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(encode(Step(step=0)) + "\n{not json\n" + encode(Step(step=1)) + "\n")
    result = read_events(path)
    assert len(result.events) == 2
    assert result.skipped_lines == [2]


def test_sigkill_of_a_writing_process_leaves_every_complete_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    script = textwrap.dedent(
        f"""
        import sys
        from trainmedic.eventlog.writer import EventWriter
        from trainmedic.events import Step
        w = EventWriter({str(path)!r})
        i = 0
        while True:
            w.emit(Step(step=i, metrics={{"loss": 1.0 / (i + 1)}}))
            if i == 200:
                print("ready", flush=True)
            i += 1
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    result = read_events(path)
    steps = [e.step for e in result.events if isinstance(e, Step)]
    assert len(steps) > 200
    assert steps == list(range(len(steps)))
    assert result.skipped_lines == []


def test_processes_appending_to_one_file_keep_lines_whole(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    script = textwrap.dedent(
        f"""
        from trainmedic.eventlog.writer import EventWriter
        from trainmedic.events import LogLine
        w = EventWriter({str(path)!r})
        for i in range(500):
            w.emit(LogLine(text="x" * 500 + str(i)))
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script]) for _ in range(4)]
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    result = read_events(path)
    assert len(result.events) == 2000
    assert result.skipped_lines == []


def test_record_epochs_and_memory_by_phase() -> None:
    events = [
        RunStart(command=["python"], t=0.0, pid=1),
        TrainingPlan(framework="keras", epochs=12, t=0.5, pid=2),
        PhaseStart(phase="train", t=1.0, pid=2),
        MemorySample(rss_bytes=100, t=1.5, pid=1),
        Epoch(epoch=0, t=2.0, pid=2),
        PhaseStart(phase="eval", t=2.1, pid=2),
        MemorySample(rss_bytes=300, t=2.5, pid=1),
        PhaseEnd(phase="eval", t=3.0, pid=2),
        MemorySample(rss_bytes=110, t=3.5, pid=1),
    ]
    record = RunRecord.of(events)
    assert record.epochs_requested == 12
    assert record.epochs_completed == 1
    assert record.memory_by_phase() == {"train": [100, 110], "eval": [300]}
    assert record.peak_rss == 300


def test_a_phase_opened_inside_an_epoch_phase_belongs_to_that_epoch() -> None:
    # A predict() called by an epoch-end callback has no epoch of its own; an OOM kill inside it
    # happened at that epoch end. One after training, or in another process, stays without one.
    events = [
        PhaseStart(phase="train", t=1.0, pid=2, epoch=0),
        PhaseEnd(phase="train", t=2.0, pid=2, epoch=0),
        PhaseStart(phase="epoch_end", t=2.0, pid=2, epoch=0),
        PhaseStart(phase="predict", t=2.1, pid=2),
        PhaseStart(phase="eval", t=2.2, pid=3),
        PhaseEnd(phase="predict", t=2.5, pid=2),
        PhaseEnd(phase="epoch_end", t=2.6, pid=2, epoch=0),
        PhaseStart(phase="predict", t=3.0, pid=2),
    ]
    spans = RunRecord.of(events).phase_spans
    assert [(s.phase, s.pid, s.epoch) for s in spans] == [
        ("train", 2, 0),
        ("epoch_end", 2, 0),
        ("predict", 2, 0),
        ("eval", 3, None),
        ("predict", 2, None),
    ]


def test_a_record_inside_an_event_is_written_as_its_fields() -> None:
    """to_dict is shallow; the encoder turns a dataclass in an event's data into a JSON object."""
    from dataclasses import dataclass

    from trainmedic.events import GuardObservation, decode, encode

    @dataclass
    class Seen:
        layer: str
        norms: list[float]

    event = GuardObservation(check="grad", data={"worst": Seen("fc", [1.0, 2.5]), "when": {"step": 3}})
    again = decode(encode(event))
    assert isinstance(again, GuardObservation)
    assert again.data == {"worst": {"layer": "fc", "norms": [1.0, 2.5]}, "when": {"step": 3}}
    assert event.to_dict()["data"] is event.data  # a view, not a copy
