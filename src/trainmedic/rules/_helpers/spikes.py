"""Memory of the non-training phases against the training they interrupt (for RUN003).

Every phase that is not training counts: evaluation, prediction (a `model.predict` inside
an epoch-end callback is the innermost phase there), the epoch end, a checkpoint, and any
phase an integration names. Consecutive samples taken in such phases form one *episode*;
each episode's peak is compared with the training memory sampled before it.

Why "before it": allocators (glibc, TensorFlow's, PyTorch's caching one) rarely hand a
spike's memory back to the system, so training samples taken after the first evaluation
read what the spike left, not what training needs. A per-run median over all training
samples then hides the very spike that raised it. An episode's baseline is the training
since the previous episode, or all training before it when that stretch was too short to
give a steady state. What makes a steady state of a baseline (a median of enough samples,
or of a short phase the highest of a few samples that agree) is the rule's to say: it passes
`steady`, which gives the yardstick or None.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trainmedic.eventlog.samples import mean_of, weight_of
from trainmedic.events import MemorySample
from trainmedic.record import RunRecord

#: (value, how many samples it stands for: `eventlog.samples` buckets) of the training before an episode.
Baseline = list[tuple[float, int]]

#: Phases that are the training itself; every other named phase is a non-training phase.
TRAINING_PHASES = frozenset({"train"})


@dataclass(slots=True)
class Episode:
    """Consecutive memory samples in non-training phases, and the training before them."""

    phase: str  # the phase of the highest sample
    peak: int
    samples: int
    baseline: Baseline
    steady: float  # the training steady state the peak is compared with (from the rule's `steady`)
    killed: bool = False  # the OOM killer ended the run inside this episode

    @property
    def baseline_samples(self) -> int:
        return sum(n for _, n in self.baseline)

    @property
    def ratio(self) -> float:
        steady = self.steady
        return self.peak / steady if steady else 0.0


def episodes(
    record: RunRecord,
    measure: Callable[[MemorySample], int | None],
    *,
    steady: Callable[[Baseline], float | None],
) -> list[Episode]:
    """The non-training episodes whose baseline has a steady state (`steady` gives one).

    `measure` reads one quantity of a sample (RSS, the cgroup's charge, GPU memory): a
    baseline and a peak are only compared in the same unit.
    """
    found: list[Episode] = []
    before: Baseline = []  # every training sample so far
    since: Baseline = []  # training samples since the last episode
    current: Episode | None = None
    for sample in record.memory_samples:
        value = measure(sample)  # a bucket of samples (`eventlog.samples`) holds their maxima
        if value is None:
            continue
        phase = record.phase_at(sample.t)
        if phase is None:
            continue  # start-up and shutdown: neither training nor a phase of it
        weight = weight_of(sample)
        if phase in TRAINING_PHASES:
            if current is not None:
                found.append(current)
                current = None
            mean = measure(mean_of(sample))  # the steady state: a bucket's mean, for its samples
            point = (value if mean is None else mean, weight)
            before.append(point)
            since.append(point)
            continue
        if current is None:
            baseline, level = since, steady(since)
            if level is None:
                baseline, level = before, steady(before)
            current = Episode(phase, value, 0, list(baseline), level if level is not None else 0.0)
            since = []
        current.samples += weight
        if value > current.peak:
            current.peak, current.phase = value, phase
    if current is not None:
        found.append(current)
    return [e for e in found if e.steady > 0]


def open_at_end(record: RunRecord, episode: Episode) -> bool:
    """Whether the last memory sample of the run lies in this (the last) episode."""
    samples = record.memory_samples
    if not samples:
        return False
    phase = record.phase_at(samples[-1].t)
    return phase is not None and phase not in TRAINING_PHASES
