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
give a median.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trainmedic.events import MemorySample
from trainmedic.record import RunRecord, weighted_median
from trainmedic.samplelog import mean_of, weight_of

#: Phases that are the training itself; every other named phase is a non-training phase.
TRAINING_PHASES = frozenset({"train"})


@dataclass(slots=True)
class Episode:
    """Consecutive memory samples in non-training phases, and the training before them."""

    phase: str  # the phase of the highest sample
    peak: int
    samples: int
    baseline: list[tuple[float, int]]  # (value, how many samples it stands for: samplelog buckets)
    killed: bool = False  # the OOM killer ended the run inside this episode

    @property
    def baseline_samples(self) -> int:
        return sum(n for _, n in self.baseline)

    @property
    def steady(self) -> float:
        return weighted_median(self.baseline)

    @property
    def ratio(self) -> float:
        steady = self.steady
        return self.peak / steady if steady else 0.0


def episodes(
    record: RunRecord, measure: Callable[[MemorySample], int | None], *, min_baseline: int
) -> list[Episode]:
    """The non-training episodes with a baseline of at least `min_baseline` training samples.

    `measure` reads one quantity of a sample (RSS, the cgroup's charge, GPU memory): a
    baseline and a peak are only compared in the same unit.
    """
    found: list[Episode] = []
    before: list[tuple[float, int]] = []  # every training sample so far
    since: list[tuple[float, int]] = []  # training samples since the last episode
    current: Episode | None = None
    for sample in record.memory_samples:
        value = measure(sample)  # a bucket of samples (samplelog) holds their maxima
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
            steady = measure(mean_of(sample))  # the steady state: a bucket's mean, for its samples
            point = (value if steady is None else steady, weight)
            before.append(point)
            since.append(point)
            continue
        if current is None:
            baseline = since if sum(n for _, n in since) >= min_baseline else before
            current = Episode(phase=phase, peak=value, samples=0, baseline=list(baseline))
            since = []
        current.samples += weight
        if value > current.peak:
            current.peak, current.phase = value, phase
    if current is not None:
        found.append(current)
    return [e for e in found if e.baseline_samples >= min_baseline]


def open_at_end(record: RunRecord, episode: Episode) -> bool:
    """Whether the last memory sample of the run lies in this (the last) episode."""
    samples = record.memory_samples
    if not samples:
        return False
    phase = record.phase_at(samples[-1].t)
    return phase is not None and phase not in TRAINING_PHASES
