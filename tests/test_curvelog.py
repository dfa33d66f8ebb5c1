"""A fast loop's step events stay bounded in events.jsonl; anomalies and the rules' verdicts survive.

Every test writes through the real `EventWriter` (the one the in-process channel and the supervisor
use) and reads the file back as `diagnose` and `report` do.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from trainmedic.eventlog.reader import read_events
from trainmedic.eventlog.samples import OPENS, weight_of
from trainmedic.eventlog.steps import POINTS
from trainmedic.eventlog.writer import EventWriter
from trainmedic.events import (
    Epoch,
    Event,
    GuardObservation,
    MemorySample,
    PhaseEnd,
    PhaseStart,
    RunEnd,
    RunStart,
    Step,
    decode,
)
from trainmedic.evidence.curves import curve, train_loss
from trainmedic.instrument.channel import child_env
from trainmedic.record import RunRecord
from trainmedic.rules.run.run003_eval_memory_spike import eval_memory_spike
from trainmedic.rules.trn.trn002_loss_divergence import loss_divergence
from trainmedic.rules.trn.trn003_not_learning import not_learning
from trainmedic.rules.trn.trn010_clipping_saturated import clipping_saturated
from trainmedic.supervise.memory import TreeSampler
from trainmedic.supervise.tree import snapshot

#: The PyTorch guard's shape: one `Step` per 10 steps, ~500 events a second (a 5,000 steps/s loop).
EVERY = 10
RATE = 500.0


def _steps(losses: list[float], *, rank: int | None = None, seed: int = 0) -> list[Step]:
    rng = random.Random(seed)
    return [
        Step(
            t=1000.0 + i / RATE,
            pid=4242,
            rank=rank,
            step=EVERY * (i + 1),
            metrics={"loss": loss, "grad_norm": 1.0 + 0.2 * rng.random()},
            duration_s=1 / (RATE * EVERY),
            data_wait_s=0.0,
        )
        for i, loss in enumerate(losses)
    ]


def _write(path: Path, events: Sequence[Event]) -> RunRecord:
    with EventWriter(path) as writer:
        for event in events:
            writer.emit(event)
    return RunRecord.of(read_events(path).events)


def _line_bound(steps: int) -> int:
    """What the writer may keep: 2 x POINTS steps one by one, then POINTS per doubling."""
    return 2 * POINTS + POINTS * max(0, math.ceil(math.log2(steps / POINTS)))


def test_a_fast_loop_is_bounded_and_keeps_every_other_event_and_anomaly_at_its_step(tmp_path: Path) -> None:
    n = 100_000
    rng = random.Random(1)
    losses = [2.3 * math.exp(-i / 20_000) + 0.2 + rng.gauss(0, 0.03) for i in range(n)]
    steps = _steps(losses)
    steps[60_000].metrics["grad_norm"] = 4e4  # a one-step explosion between ordinary norms
    for i in range(80_000, n):  # the loss goes NaN and stays so
        steps[i].metrics["loss"] = math.nan
    others: list[Event] = []
    for k, i in enumerate(range(0, n, 25_000)):
        t = steps[i].t + 1e-4
        others += [
            PhaseStart(t=t, pid=4242, phase="train", epoch=k),
            Epoch(t=t + 1e-5, pid=4242, epoch=k, metrics={"loss": losses[i]}),
            PhaseEnd(t=t + 2e-5, pid=4242, phase="train", epoch=k),
        ]
    others.append(GuardObservation(t=steps[-1].t + 1, pid=4242, check="sampling", data={"every": EVERY}))
    events = sorted([*steps, *others], key=lambda e: e.t)

    path = tmp_path / "events.jsonl"
    record = _write(path, events)

    written = [e for e in record.events if isinstance(e, Step)]
    assert len(written) <= _line_bound(EVERY * n)
    assert len(written) < n // 4
    # Everything that is not a plain step, as sent and in order.
    assert [e for e in record.events if not isinstance(e, Step)] == others
    # The anomalies, at their exact steps: the explosion and the first NaN.
    kept = {e.step: e for e in written if e.summary is not None and "kept" in e.summary}
    assert kept[steps[60_000].step].metrics["grad_norm"] == 4e4
    assert math.isnan(kept[steps[80_000].step].metrics["loss"])
    # Every step is accounted for, up to the last one.
    assert sum((e.summary or {}).get("events", 1) for e in written) == n
    assert written[-1].step == steps[-1].step
    # A bucket's point: the mean of its steps, with their range.
    bucket = next(e for e in written if e.summary is not None and "events" in e.summary)
    assert bucket.summary is not None
    assert bucket.summary["min"]["loss"] <= bucket.metrics["loss"] <= bucket.summary["max"]["loss"]
    # The step curve ends where the NaN began, as on the full one.
    loss = curve(record, "loss", prefer="step")
    assert loss is not None
    finite = loss.finite_prefix()
    assert int(finite.x[-1]) < steps[80_000].step == int(loss.x[len(finite)])


def _diverging(n: int) -> list[float]:
    rng = random.Random(2)
    turn = int(0.6 * n)
    low = 0.3 + 2.3 * math.exp(-turn / (0.1 * n))
    return [
        (2.3 * math.exp(-i / (0.1 * n)) + 0.3 if i < turn else low + 4.0 * (i - turn) / (n - turn))
        + rng.gauss(0, 0.05)
        for i in range(n)
    ]


def _at_chance(n: int) -> list[float]:
    rng = random.Random(3)
    return [math.log(10) + rng.gauss(0, 0.02) for _ in range(n)]


def _learning(n: int) -> list[float]:
    rng = random.Random(4)
    return [2.3 * math.exp(-i / (0.3 * n)) + 0.1 + rng.gauss(0, 0.05) for i in range(n)]


@pytest.mark.parametrize(
    ("shape", "expected"),
    [(_diverging, {"TRN002"}), (_at_chance, {"TRN003"}), (_learning, set())],
    ids=["diverging", "not-learning", "healthy"],
)
def test_the_rules_judge_the_bounded_curve_as_the_full_one(
    tmp_path: Path, shape: object, expected: set[str]
) -> None:
    n = 60_000
    steps = _steps(shape(n))  # type: ignore[operator]
    full = RunRecord.of(steps)
    bounded = _write(tmp_path / "events.jsonl", list(steps))
    assert len(bounded.events) < n // 2

    def judge(record: RunRecord) -> dict[str, int | None]:
        return {f.code: f.step for f in loss_divergence(record) + not_learning(record)}

    on_full, on_bounded = judge(full), judge(bounded)
    assert set(on_full) == set(on_bounded) == expected
    for code, step in on_full.items():  # the same place, within a hundredth of the run
        assert step is None or abs((on_bounded[code] or 0) - step) <= EVERY * n / 100


def test_observations_between_steps_do_not_cut_the_buckets(tmp_path: Path) -> None:
    """A guard's periodic read (the clipping counters every few steps) is written as it comes;
    the steps around it merge as they would without it."""
    steps = _steps(_learning(60_000))
    reads = [
        GuardObservation(t=s.t + 1e-6, pid=4242, check="clipping", data={"calls": 10}, step=s.step)
        for s in steps[::10]
    ]
    alone = _write(tmp_path / "alone.jsonl", list(steps))
    mixed = _write(tmp_path / "mixed.jsonl", sorted([*steps, *reads], key=lambda e: e.t))
    assert sum(weight_of(o) for o in mixed.of_type(GuardObservation)) == len(reads)
    assert [(s.step, s.metrics) for s in mixed.of_type(Step)] == [
        (s.step, s.metrics) for s in alone.of_type(Step)
    ]


def test_ranks_write_buckets_that_end_on_the_same_steps(tmp_path: Path) -> None:
    n = 30_000
    losses = _learning(n)
    events = sorted([*_steps(losses, rank=0, seed=5), *_steps(losses, rank=1, seed=6)], key=lambda e: e.t)
    record = _write(tmp_path / "events.jsonl", events)
    one_rank = _write(tmp_path / "one.jsonl", _steps(losses, rank=0, seed=5))
    both, single = train_loss(record), train_loss(one_rank)
    assert both is not None
    assert single is not None
    assert len(both) == len(single)  # averaged across ranks step by step, not side by side


def test_a_new_training_in_the_same_process_starts_at_full_resolution(tmp_path: Path) -> None:
    first = _steps(_learning(30_000))
    second = _steps(_diverging(300))
    for s in second:
        s.t += 500.0
    record = _write(tmp_path / "events.jsonl", [*first, *second])
    loss = train_loss(record)
    assert loss is not None
    assert [int(x) for x in loss.x] == [s.step for s in second]  # the last training, step by step


def test_the_last_bucket_is_written_when_the_process_ends(tmp_path: Path) -> None:
    """Through the in-process channel, as under `trainmedic run`: the bucket still open at exit
    is written by the channel's exit handler."""
    path = tmp_path / "events.jsonl"
    script = textwrap.dedent(
        """
        from trainmedic.events import Step
        from trainmedic.instrument import channel
        for i in range(1, 40_001):
            channel.emit(Step(step=10 * i, metrics={"loss": 1.0 / i}))
        """
    )
    subprocess.run([sys.executable, "-c", script], env=child_env(path), check=True, timeout=120)
    written = [e for e in read_events(path).events if isinstance(e, Step)]
    assert len(written) < 40_000 // 2
    assert written[-1].step == 400_000
    assert sum((e.summary or {}).get("events", 1) for e in written) == 40_000


# -- memory samples and clipping reads (eventlog.samples) --------------------------------------
GIB = 1 << 30
TRAINER, SUPERVISOR = 100, 50
WORKERS = ("101", "102", "103", "104")


def _memory_run(epochs: int, spike_at: int | None, *, workers: bool = True) -> list[Event]:
    """`trainmedic run`'s events of a long run: the trainer's phases (train 540 s, eval 60 s per
    epoch) and the supervisor's memory sample every 2 s, the first after each phase change marked
    as the sampler marks it. Training holds ~2 GiB; each evaluation ~1.2x, the one of epoch
    `spike_at` 2x (its peak in the middle of the evaluation)."""
    rng = random.Random(7)
    events: list[Event] = [RunStart(t=0.0, pid=SUPERVISOR, command=["python", "train.py"])]
    t = 1.0
    for epoch in range(epochs):
        for phase, seconds in (("train", 540), ("eval", 60)):
            events.append(PhaseStart(t=t, pid=TRAINER, phase=phase, epoch=epoch))
            for i in range(seconds // 2):
                level = 2 * GIB if phase == "train" else 2.4 * GIB
                if phase == "eval" and epoch == spike_at:
                    level = 2 * GIB * (1 + min(i, 30 - i) / 15)  # up to 4 GiB and back
                rss = int(level * (1 + rng.uniform(-0.02, 0.02)))
                processes = {str(TRAINER): rss}
                if workers:
                    processes |= {w: int(GIB / 4 * (1 + rng.uniform(-0.02, 0.02))) for w in WORKERS}
                events.append(
                    MemorySample(
                        t=t + 2 * i + 0.5,
                        pid=SUPERVISOR,
                        rss_bytes=sum(processes.values()),
                        processes=processes,
                        cpu_percent=99.0,
                        summary={OPENS: True} if i == 0 else None,
                    )
                )
            t += seconds
            events.append(PhaseEnd(t=t - 0.01, pid=TRAINER, phase=phase, epoch=epoch))
    events.append(RunEnd(t=t + 1, pid=SUPERVISOR, exit_code=0))
    return events


def _write_two(path: Path, events: Sequence[Event]) -> RunRecord:
    """Through two writers appending to one file, as under `run`: the trainer's and the supervisor's."""
    with EventWriter(path) as trainer, EventWriter(path) as supervisor:
        for event in events:
            (trainer if event.pid == TRAINER else supervisor).emit(event)
    return RunRecord.of(read_events(path).events)


@pytest.mark.parametrize("spike_at", [None, 3, 60], ids=["healthy", "spike-early", "spike-late"])
def test_memory_samples_are_bounded_and_judged_as_the_full_stream(
    tmp_path: Path, spike_at: int | None
) -> None:
    events = _memory_run(80, spike_at)  # 13 hours, 24,000 samples of five processes
    full = RunRecord.of(events)
    path = tmp_path / "events.jsonl"
    bounded = _write_two(path, events)
    samples = bounded.memory_samples
    assert len(samples) < len(full.memory_samples) // 3
    assert sum(weight_of(s) for s in samples) == len(full.memory_samples)
    assert bounded.peak_rss == full.peak_rss
    for pid in (str(TRAINER), *WORKERS):  # each process's own peak
        assert max(s.processes[pid] for s in samples) == max(s.processes[pid] for s in full.memory_samples)
    on_full, on_bounded = eval_memory_spike(full), eval_memory_spike(bounded)
    assert (
        [f.code for f in on_bounded] == [f.code for f in on_full] == ([] if spike_at is None else ["RUN003"])
    )
    for a, b in zip(on_full, on_bounded, strict=True):
        assert b.evidence["peak_bytes"] == a.evidence["peak_bytes"]
        assert b.evidence["train_samples"] == a.evidence["train_samples"]
        assert abs(b.evidence["ratio"] - a.evidence["ratio"]) <= 0.02 * a.evidence["ratio"]


def test_a_bucket_of_memory_samples_never_spans_a_phase(tmp_path: Path) -> None:
    record = _write_two(tmp_path / "events.jsonl", _memory_run(40, None, workers=False))
    for sample in record.memory_samples:
        last = (sample.summary or {}).get("last_t", sample.t)
        assert record.phase_at(sample.t) == record.phase_at(last)
        assert sample.summary is None or OPENS not in sample.summary


def _clipping_run(reads: int, *, loss_rises: bool, growth: float = 1.0) -> list[Event]:
    """The PyTorch guard's events of a loop that clips at 1.0 on every step, its pre-clip norm
    ~40 (times `growth` by the end): a clipping read and a step event per 10 steps."""
    rng = random.Random(8)
    events: list[Event] = []
    for i in range(reads):
        t, first = 1000.0 + i / RATE, EVERY * i + 1
        frac = i / reads
        loss = 2.3 + 6.0 * frac if loss_rises else 2.3 * math.exp(-3 * frac) + 0.2
        norm = 40.0 * (growth**frac) * (1 + rng.uniform(-0.1, 0.1))
        events.append(
            Step(t=t, pid=4242, step=first + EVERY - 1, metrics={"loss": loss + rng.gauss(0, 0.02)})
        )
        data = {
            "kind": "norm",
            "threshold": 1.0,
            "calls": EVERY,
            "engaged": EVERY if rng.random() > 0.02 else EVERY - 1,
            "first_step": first,
            "last_step": first + EVERY - 1,
            "norm_median": norm,
            "norm_max": norm * 1.3,
            "nonfinite": 0,
            "factor_median": norm,
            "measured": "every call",
        }
        events.append(
            GuardObservation(t=t + 1e-6, pid=4242, check="clipping", data=data, step=first + EVERY - 1)
        )
    return events


@pytest.mark.parametrize(
    ("loss_rises", "growth", "fires"),
    [(True, 1.0, True), (False, 1.0, False), (False, 300.0, True)],
    ids=["loss-rises", "by-design", "norm-grows"],
)
def test_clipping_reads_are_bounded_and_judged_as_the_full_stream(
    tmp_path: Path, loss_rises: bool, growth: float, fires: bool
) -> None:
    events = _clipping_run(40_000, loss_rises=loss_rises, growth=growth)
    full = RunRecord.of(events)
    bounded = _write(tmp_path / "events.jsonl", events)
    reads = bounded.guard_observations
    assert len(reads) < 40_000 // 4
    assert sum(weight_of(o) for o in reads) == 40_000
    assert sum(o.data["calls"] for o in reads) == sum(o.data["calls"] for o in full.guard_observations)
    assert max(o.data["norm_max"] for o in reads) == max(o.data["norm_max"] for o in full.guard_observations)
    on_full, on_bounded = clipping_saturated(full), clipping_saturated(bounded)
    assert [f.code for f in on_bounded] == [f.code for f in on_full] == (["TRN010"] if fires else [])
    for a, b in zip(on_full, on_bounded, strict=True):
        assert b.evidence["shown_by"] == a.evidence["shown_by"]
        share = a.evidence["engaged_share"]
        assert abs(b.evidence["engaged_share"] - share) <= 0.005
        assert (
            abs(b.evidence["median_factor"] - a.evidence["median_factor"])
            <= 0.05 * a.evidence["median_factor"]
        )


def test_a_nonfinite_clipping_read_is_kept_at_its_step(tmp_path: Path) -> None:
    events = _clipping_run(10_000, loss_rises=False)
    bad = next(e for e in events[15_000:] if isinstance(e, GuardObservation))
    bad.data = {**bad.data, "nonfinite": 3, "norm_median": None}
    record = _write(tmp_path / "events.jsonl", events)
    kept = [o for o in record.guard_observations if o.data.get("nonfinite")]
    assert [(o.step, weight_of(o)) for o in kept] == [(bad.step, 1)]


def test_the_sampler_marks_the_first_sample_of_each_stretch() -> None:
    """`densely` (a new phase, a new process) marks the next sample: the writer's bucket ends there."""
    sampler = TreeSampler(base_interval=0.1)
    procs = snapshot(os.getpid())
    marked = [OPENS in (sampler.sample(procs).summary or {}) for _ in range(3)]
    sampler.densely()
    marked += [OPENS in (sampler.sample(procs).summary or {}) for _ in range(2)]
    assert marked == [True, False, False, True, False]


def test_a_guard_window_keeps_its_spike_through_the_buckets(tmp_path: Path) -> None:
    """The guard's loss windows (`Step.window`: every loss of the window counted) are bucketed as
    plain steps; a spike between two points stays in the bucket's envelope, and an old run folder
    (no window) reads as before."""
    n = 3 * POINTS
    steps = _steps(_learning(n))
    for s in steps:
        s.window = {
            "first_step": s.step - EVERY + 1,
            "n": EVERY,
            "min": s.metrics["loss"] * 0.9,
            "max": s.metrics["loss"] * 1.1,
            "max_step": s.step,
        }
    spiked = steps[n // 2]
    assert spiked.window is not None
    spiked.window["max"] = 500.0
    record = _write(tmp_path / "events.jsonl", steps)
    written = record.steps
    assert len(written) < n  # bucketed, as plain steps are
    holding = [
        s
        for s in written
        if s.summary is not None and s.summary.get("first_step", s.step) <= spiked.step <= s.step
    ]
    assert len(holding) == 1
    assert holding[0].summary is not None
    assert holding[0].summary["max"]["loss"] == 500.0
    old_line = json.dumps({k: v for k, v in steps[0].to_dict().items() if k != "window"})
    old = decode(old_line)
    assert isinstance(old, Step)
    assert old.window is None
    assert old.metrics == steps[0].metrics
