"""How the HTML report scales with run length: page size and render time, 1 h to 24 h.

    PYTHONPATH=src python benchmarks/report_render.py

Each run is sampled every 0.5 s (4 processes in the tree), logs 10 steps/s and an
evaluation phase every 5 minutes with a memory spike. Prints, per length, the
events.jsonl size, the page size, their ratio, and the render time: the page must
stay under 2 MB however long the run (timelines are downsampled, peaks kept).
"""

from __future__ import annotations

import math
import random
import tempfile
import time
from pathlib import Path

from trainmedic.eventlog.writer import EventWriter
from trainmedic.events import Epoch, Event, MemorySample, PhaseEnd, PhaseStart, RunEnd, RunStart, Step
from trainmedic.record import RunRecord
from trainmedic.report.html import render_html


def run_events(hours: float) -> list[Event]:
    rng = random.Random(0)
    seconds = hours * 3600
    events: list[Event] = [RunStart(t=0, command=["python", "train.py"])]
    for i in range(int(seconds / 0.5)):
        t = i * 0.5
        in_eval = t % 300 >= 280
        base = 2**30 * (2 + 0.1 * math.sin(t / 50)) + (2**30 if in_eval else 0)
        tree = {str(100 + k): int(base / (k + 1) * rng.uniform(0.98, 1.02)) for k in range(4)}
        events.append(MemorySample(t=t, rss_bytes=sum(tree.values()), processes=tree, limit_bytes=8 * 2**30))
    for i in range(int(seconds * 10)):
        loss = 2.3 * math.exp(-i / 20000) + rng.uniform(0, 0.05)
        events.append(Step(t=i / 10, step=i, metrics={"loss": loss}, duration_s=0.09, data_wait_s=0.01))
    for k, t in enumerate(range(0, int(seconds), 300)):
        events += [PhaseStart(t=t, phase="train", epoch=k), PhaseEnd(t=t + 280, phase="train", epoch=k)]
        events += [PhaseStart(t=t + 280, phase="eval", epoch=k), PhaseEnd(t=t + 300, phase="eval", epoch=k)]
        events.append(Epoch(t=t + 300, epoch=k, metrics={"loss": 1 / (k + 1), "val_loss": 1.1 / (k + 1)}))
    events.append(RunEnd(t=seconds, exit_code=0, duration_s=seconds))
    return events


def main() -> None:
    print(f"{'run':>6} {'events.jsonl':>13} {'report.html':>12} {'ratio':>7} {'render':>8}")
    for hours in (1, 4, 24):
        events = run_events(hours)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "events.jsonl"
            with EventWriter(path) as writer:
                for event in events:
                    writer.emit(event)
            raw = path.stat().st_size
        started = time.perf_counter()
        page = render_html(RunRecord.of(events), [], {}, [], f"{hours} h")
        took = time.perf_counter() - started
        size = len(page.encode())
        print(f"{hours:>5}h {raw / 1e6:>11.1f}MB {size / 1e3:>10.0f}KB {raw / size:>6.0f}x {took:>7.1f}s")


if __name__ == "__main__":
    main()
