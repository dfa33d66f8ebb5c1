"""A one-hour run sampled every 0.5 s renders to a page under 2 MB, peaks intact.

The hour is rebuilt from a real run: the healthy trainer's measured memory
samples and steps, repeated end to end with their times shifted, with four
processes in the tree and one evaluation phase every five minutes.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from trainmedic.eventlog.reader import read_events
from trainmedic.events import Epoch, Event, MemorySample, PhaseEnd, PhaseStart, RunEnd, RunStart, Step
from trainmedic.record import RunRecord
from trainmedic.report.html import render_html
from trainmedic.report.html_format import fmt_bytes
from trainmedic.report.indexed import IndexedRecord

HOUR_S, SAMPLE_S, STEPS_PER_S = 3600.0, 0.5, 10
pytestmark = pytest.mark.slow


def one_hour_from(run_dir: Path) -> list[Event]:
    real = read_events(run_dir / "events.jsonl").events
    samples = [e for e in real if isinstance(e, MemorySample)]
    steps = [e for e in real if isinstance(e, Step)]
    start = next(e for e in real if isinstance(e, RunStart))
    t0 = start.t
    events: list[Event] = [dataclasses.replace(start, t=t0)]
    for i in range(int(HOUR_S / SAMPLE_S)):
        s = samples[i % len(samples)]
        tree = {str(1000 + k): s.rss_bytes // (k + 1) for k in range(4)}
        events.append(
            dataclasses.replace(s, t=t0 + i * SAMPLE_S, processes=tree, rss_bytes=sum(tree.values()))
        )
    for i in range(int(HOUR_S * STEPS_PER_S)):
        s = steps[i % len(steps)]
        events.append(dataclasses.replace(s, t=t0 + i / STEPS_PER_S, step=i, epoch=i // 3000))
    for k, t in enumerate(range(0, int(HOUR_S), 300)):
        events += [
            PhaseStart(t=t0 + t, phase="train", epoch=k),
            PhaseEnd(t=t0 + t + 280, phase="train", epoch=k),
        ]
        events += [
            PhaseStart(t=t0 + t + 280, phase="eval", epoch=k),
            PhaseEnd(t=t0 + t + 300, phase="eval", epoch=k),
        ]
        events.append(
            Epoch(t=t0 + t + 300, epoch=k, metrics={"loss": 1 / (k + 1), "val_loss": 1.2 / (k + 1)})
        )
    events.append(RunEnd(t=t0 + HOUR_S, exit_code=0, duration_s=HOUR_S))
    return events


def test_one_hour_report_is_small_and_keeps_the_peak(real_runs: dict[str, Path]) -> None:
    events = one_hour_from(real_runs["healthy"])
    spike_at = next(
        i for i, e in enumerate(events) if isinstance(e, MemorySample) and e.t > events[0].t + 2000
    )
    spike = events[spike_at]
    assert isinstance(spike, MemorySample)
    highest = max(e.rss_bytes for e in events if isinstance(e, MemorySample))
    peak = highest * 3  # above every sample, whatever the real run's samples were
    events[spike_at] = dataclasses.replace(spike, rss_bytes=peak)  # one sample, as an eval spike
    record = RunRecord.of(events)
    assert len(record.memory_samples) == 7200
    page = render_html(record, [], {}, [], "one hour")
    size = len(page.encode("utf-8"))
    assert size < 2_000_000, f"{size / 1e6:.2f} MB"
    memory = re.search(r'<figure class="chart" data-chart="memory">.*?</figure>', page, re.S)
    assert memory is not None
    assert f"peak {peak / 2**20:.3g} MiB" in memory.group(
        0
    ) or f"peak {peak / 2**30:.3g} GiB" in memory.group(0)
    assert fmt_bytes(record.peak_rss) in page  # the stats block names the true peak
    for path in re.findall(r'<path class="line[^"]*" d="([^"]*)"', page):
        assert path.count("L") < 800


def test_indexed_record_answers_like_run_record(real_runs: dict[str, Path]) -> None:
    """The report's fast record gives the same answers as RunRecord on real runs and on a long one."""
    streams = [read_events(run / "events.jsonl").events for run in real_runs.values()]
    hour = one_hour_from(real_runs["oom"])
    hour.append(PhaseStart(t=hour[0].t + 1000, phase="checkpoint"))  # a phase left open, nested in train
    streams.append(hour)
    for events in streams:
        plain, fast = RunRecord.of(events), IndexedRecord.wrap(RunRecord.of(events))
        assert fast.memory_by_phase() == plain.memory_by_phase()
        assert fast.memory_by_phase(gpu=True) == plain.memory_by_phase(gpu=True)
        for kind in (Event, MemorySample, Step, Epoch, RunEnd, PhaseStart):
            assert fast.of_type(kind) == plain.of_type(kind), kind
