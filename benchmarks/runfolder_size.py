"""How big a fast loop's events.jsonl grows: every event written, and as trainmedic writes it.

    PYTHONPATH=src python benchmarks/runfolder_size.py [--hours 1]

The run modelled is the one a manual-update PyTorch loop gives under `trainmedic run`: 5,300
steps a second (a linear regression updated by hand, `p -= lr * p.grad`, ran 5,267 steps/s
under `run` on a 2-core machine), the guard's `Step` per 10 steps (loss, gradient norm, step
time, data wait), a loop that clips: the guard's `clipping` read and `grad_norm_preclip` point
per 100 steps (its reads, widened to keep to its budget on a loop this fast), and the
supervisor's memory sample every 2 s (its interval while memory is flat) of the trainer and 4
DataLoader workers. Every event of the first minute and of the first `--hours` is fed to the
real `EventWriter`s (the trainer's and the supervisor's, appending to one file; event times are
simulated, nothing sleeps); "every event" is the same events each written as one line. A day
and a week of memory samples are fed too (a separate file). A day's and a week's step events
and clipping reads are not fed (a week is 320 million step events): their lines are computed
from the writer's rule, `POINTS` buckets per doubling of the steps run, from the hours that
were fed. Last, the time `emit` takes per event, writing every event and bounded, over the
events of a 10-minute run.
"""

from __future__ import annotations

import argparse
import math
import random
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from trainmedic.eventlog import samples
from trainmedic.eventlog.steps import POINTS
from trainmedic.eventlog.writer import EventWriter
from trainmedic.events import Event, GuardObservation, MemorySample, Metric, Step, encode

STEPS_PER_S = 5300.0
EVERY = 10  # the guard's loss window: one Step event per 10 steps
MEMORY_EVERY_S = 2.0
CLIP_EVERY = 100  # steps between the guard's clipping reads
WORKERS = 4
REPEATS = 3


def _step(i: int, rng: random.Random) -> Step:
    loss = 0.01 + 7.0 * math.exp(-i / 50) + rng.gauss(0, 0.002)
    return Step(
        t=1.8e9 + i * EVERY / STEPS_PER_S,
        pid=24609,
        node="vm",
        step=(i + 1) * EVERY,
        metrics={"loss": loss, "grad_norm": 0.05 + rng.random() * 0.02},
        duration_s=1.0 / STEPS_PER_S,
        data_wait_s=0.0,
    )


def _memory(t: float) -> MemorySample:
    rss = {"24609": 232_546_304} | {str(24700 + w): 61_046_784 + 4096 * w for w in range(WORKERS)}
    return MemorySample(
        t=t, pid=24605, node="vm", rss_bytes=sum(rss.values()), processes=rss, cpu_percent=99.5
    )


def _clipping(step: int, t: float, rng: random.Random) -> list[Event]:
    """The guard's read of a loop that clips at 1.0 on every step, pre-clip norm ~40."""
    norm = 40.0 * (1 + rng.uniform(-0.1, 0.1))
    data = {
        "kind": "norm",
        "threshold": 1.0,
        "calls": CLIP_EVERY,
        "engaged": CLIP_EVERY,
        "first_step": step - CLIP_EVERY + 1,
        "last_step": step,
        "norm_median": norm,
        "norm_max": norm * 1.3,
        "nonfinite": 0,
        "factor_median": norm,
        "measured": "every call",
    }
    return [
        GuardObservation(t=t, pid=24609, node="vm", check="clipping", data=data, step=step),
        Metric(t=t, pid=24609, node="vm", name=samples.PRECLIP, value=norm * 1.1, step=step),
    ]


def run_events(seconds: float) -> Iterator[Event]:
    """The run's events in time order: the guard's steps and clipping reads, the supervisor's
    memory samples."""
    rng = random.Random(0)
    next_memory = 1.8e9
    for i in range(int(seconds * STEPS_PER_S / EVERY)):
        step = _step(i, rng)
        if step.t >= next_memory:
            yield _memory(next_memory)
            next_memory += MEMORY_EVERY_S
        yield step
        if step.step % CLIP_EVERY == 0:
            yield from _clipping(step.step, step.t, rng)


def _writer_of(event: Event, trainer: EventWriter, supervisor: EventWriter) -> EventWriter:
    return supervisor if isinstance(event, MemorySample) else trainer


def feed(events: Iterable[Event], path: Path, *, bounded: bool = True) -> tuple[int, float]:
    """(bytes written, seconds in `emit`): the events fed to the real writers, the trainer's and
    the supervisor's, appending to one file as under `run`. Unbounded, the writers are told at
    once that their process ends (`flush`): they write every event as it comes."""
    with EventWriter(path) as trainer, EventWriter(path) as supervisor:
        if not bounded:
            trainer.flush()
            supervisor.flush()
        started = time.perf_counter()
        for event in events:
            _writer_of(event, trainer, supervisor).emit(event)
        took = time.perf_counter() - started
    return path.stat().st_size, took


def memory_file(seconds: float, path: Path) -> tuple[int, int]:
    """(bytes as written, bytes every sample a line) of `seconds` of memory samples alone."""
    every = 0
    with EventWriter(path) as supervisor:
        for i in range(int(seconds / MEMORY_EVERY_S)):
            sample = _memory(1.8e9 + i * MEMORY_EVERY_S)
            every += len(encode(sample)) + 1
            supervisor.emit(sample)
    return path.stat().st_size, every


def emit_costs(events: list[Event], tmp: Path) -> dict[bool, float]:
    """Microseconds in `emit` per event, writing every step (False) and bounded (True)."""
    best = {False: math.inf, True: math.inf}
    for repeat in range(REPEATS):
        for bounded in (False, True):
            _, took = feed(events, tmp / f"cost-{repeat}-{bounded}.jsonl", bounded=bounded)
            best[bounded] = min(best[bounded], took / len(events) * 1e6)
    return best


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def _kind(line: bytes) -> str:
    for kind in ("step", "memory", "guard", "metric"):
        if f'"kind":"{kind}"'.encode() in line:
            return kind
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hours", type=float, default=1.0)
    hours = parser.parse_args().hours
    print(f"{'run':>8} {'every event':>12} {'trainmedic':>12} {'step events':>14} {'how':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        minute = list(run_events(60.0))
        raw, _ = feed(minute, Path(tmp) / "raw.jsonl", bounded=False)
        small, _ = feed(minute, Path(tmp) / "minute.jsonl")
        steps = sum(isinstance(e, Step) for e in minute)
        print(f"{'1 min':>8} {_mb(raw):>12} {_mb(small):>12} {steps:>14,} {'fed':>9}")
        costs = emit_costs(list(run_events(600.0)), Path(tmp))
        path = Path(tmp) / "hour.jsonl"
        every_line: dict[str, int] = {}
        n_steps = 0
        with EventWriter(path) as trainer, EventWriter(path) as supervisor:
            for event in run_events(hours * 3600):
                every_line[event.kind] = every_line.get(event.kind, 0) + len(encode(event)) + 1
                n_steps += isinstance(event, Step)
                _writer_of(event, trainer, supervisor).emit(event)
        lines: dict[str, int] = {}
        size: dict[str, int] = {}
        with path.open("rb") as file:
            for line in file:
                kind = _kind(line)
                lines[kind] = lines.get(kind, 0) + 1
                size[kind] = size.get(kind, 0) + len(line)
        memory = {label: memory_file(later, Path(tmp) / f"memory-{label}.jsonl") for label, later in LATER}
    written = sum(size.values())
    print(
        f"{f'{hours:g} h':>8} {_mb(sum(every_line.values())):>12} {_mb(written):>12} {n_steps:>14,} "
        f"{'fed':>9}  ({lines.get('step', 0):,} step lines {_mb(size.get('step', 0))}, "
        f"{lines.get('guard', 0) + lines.get('metric', 0):,} clipping lines "
        f"{_mb(size.get('guard', 0) + size.get('metric', 0))}, {lines.get('memory', 0):,} memory lines "
        f"{_mb(size.get('memory', 0))})"
    )
    seconds = hours * 3600
    for label, later in LATER:
        more = math.log2(later / seconds)
        parts = {  # the lines fed, and POINTS (samples.POINTS) more per doubling, at their mean size
            kind: (lines.get(kind, 0) + points * more) * size.get(kind, 0) / max(1, lines.get(kind, 0))
            for kind, points in (("step", POINTS), ("guard", samples.POINTS), ("metric", samples.POINTS))
        }
        memory_bytes, memory_every = memory[label]
        every = later / seconds * (sum(every_line.values()) - every_line.get("memory", 0)) + memory_every
        total = sum(parts.values()) + memory_bytes
        print(
            f"{label:>8} {_mb(every):>12} {_mb(total):>12} {later * STEPS_PER_S / EVERY:>14,.0f} "
            f"{'computed':>9}  (step lines {_mb(parts['step'])}, clipping lines "
            f"{_mb(parts['guard'] + parts['metric'])} computed; memory samples {_mb(memory_bytes)} fed)"
        )
    print(
        f"writer, per event of a 10-minute run (best of {REPEATS}): {costs[False]:.1f} us writing "
        f"every event, {costs[True]:.1f} us bounded"
    )


LATER = (("1 day", 86400.0), ("1 week", 7 * 86400.0))


if __name__ == "__main__":
    main()
