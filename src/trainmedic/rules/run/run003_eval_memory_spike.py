"""RUN003 `eval-memory-spike`: memory of a non-training phase far over the training before it.

Collector: the supervisor (`trainmedic run`) sends `MemorySample`s of the trainer tree (RSS,
the cgroup's charge, GPU memory where NVML is available) and the phases the trainer reports
or its log shows (`PhaseStart`/`PhaseEnd`). Each non-training episode is compared with the
training sampled before it (`_helpers.spikes`); a spike the OOM killer cut short (RUN001)
reached at least the limit. Reported even when the run survived.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trainmedic.events import Event, MemoryLimit, MemorySample, PhaseEnd, RunEnd, RunStart
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord, weighted_median
from trainmedic.rules._helpers import spikes as _spikes
from trainmedic.rules._helpers.attempts import attempts, oom_explains
from trainmedic.rules._helpers.run_examples import GIB, epoch_with_eval
from trainmedic.units import human_bytes


def _example() -> list[Event]:
    """Training holds 2 GiB; the epoch's evaluation peaks at 4 GiB (2x); the run ends well."""
    return [
        RunStart(t=0.0, pid=100, command=["python", "train.py"]),
        *epoch_with_eval(2 * GIB, 4 * GIB),
        PhaseEnd(t=9.0, pid=100, phase="eval", epoch=2),
        RunEnd(t=10.0, pid=100, exit_code=0),
    ]


SPEC = FindingSpec(
    code="RUN003",
    slug="eval-memory-spike",
    severity=Severity.WARNING,
    title="Memory spike at evaluation / epoch end",
    what=(
        "Memory during a non-training phase (evaluation, prediction, the epoch end and its "
        "callbacks, a checkpoint) rose well above the training steady state before it (1.5x "
        "or more); an OOM kill inside such a phase counts as reaching the limit."
    ),
    why=(
        "The spike repeats every epoch and decides the memory the run needs: on a smaller "
        "card or a busier machine it becomes an OOM kill at an epoch boundary."
    ),
    example="Training holds 2.1 GiB; each epoch-end mAP callback peaks at 4.0 GiB (1.9x).",
    fix=(
        "Evaluate once after training (or every k epochs; Keras: "
        "callbacks=[trainmedic.keras.Deferred(heavy_callback, every=k)]) and keep a light "
        "per-epoch validation loss (fit's validation_data); stream the metric in small "
        "batches instead of one big predict."
    ),
    decided_in=("run events",),
    example_input=_example,
)

#: A spike: the phase's peak over the steady state of the training before it.
SPIKE_RATIO = 1.5
#: Training samples an episode's baseline needs before its median counts.
MIN_TRAIN_SAMPLES = 3
#: A training phase sampled fewer times (a first epoch of under a second, its prediction then
#: killed: no later epoch brings more samples) has a steady state when it was sampled at least
#: SHORT_MIN_SAMPLES times and those samples lie within SHORT_SPREAD of each other; its highest
#: sample is then the yardstick, an upper bound of what training was seen to hold, so the
#: ratio can only be understated. One sample may be taken before training allocated anything,
#: and samples that still climb by more than the spread are a ramp, not a steady state: neither
#: gives a yardstick, and the episode is not judged.
SHORT_MIN_SAMPLES = 2
SHORT_SPREAD = 0.10

#: What each memory kind reads of a sample; "cgroup" is the charge a cgroup limit caps.
_MEASURES: dict[str, Callable[[MemorySample], int | None]] = {
    "host": lambda s: s.rss_bytes,
    "gpu": lambda s: s.gpu_bytes,
    "cgroup": lambda s: s.cgroup_bytes,
}


@dataclass(frozen=True, slots=True)
class Spike:
    """The worst spike of one kind of memory, and how many episodes spiked."""

    kind: str  # "host" | "gpu"
    charged: bool  # host memory read as the cgroup's charge (the run was OOM-killed at its limit)
    worst: _spikes.Episode
    spikes: int

    def evidence(self) -> dict[str, object]:
        worst = self.worst
        return {
            "memory": "cgroup" if self.charged else self.kind,
            "phase": worst.phase,
            "train_median_bytes": int(worst.steady),  # the highest sample of a short phase
            "peak_bytes": worst.peak,
            "ratio": round(worst.ratio, 2),
            "train_samples": worst.baseline_samples,
            "spike_samples": worst.samples,
            "killed_at_limit": worst.killed,
            "spikes": self.spikes,
            "baseline": (
                "training memory sampled before the spike (since the previous one)"
                if worst.baseline_samples >= MIN_TRAIN_SAMPLES
                else f"the highest of {worst.baseline_samples} agreeing training samples (a short phase)"
            ),
        }


# -- the decision ---------------------------------------------------------------------------
def eval_memory_spike(record: RunRecord) -> list[Finding]:
    """Host memory (RSS) and, where NVML sampled it, GPU memory: each spike is its own finding.

    Every non-training phase counts, each against the training before it (see `_spikes`).
    When the OOM killer ended the run inside such a phase, the phase needed at least the
    limit: that is its peak, even where the kill came before a sample could see it.
    """
    limit = _killed_by_limit(record)
    return [
        SPEC.finding(message(spike), evidence=spike.evidence())
        for kind in ("host", "gpu")
        if (spike := _worst_spike(record, kind, limit if kind == "host" else None)) is not None
    ]


def _killed_by_limit(record: RunRecord) -> int | None:
    """The memory limit of the last attempt, when the OOM killer ended it."""
    views = attempts(record)
    if not views or not oom_explains(views[-1]):
        return None
    limits = [e for e in views[-1].events if isinstance(e, MemoryLimit)]
    return limits[-1].limit_bytes if limits else None


def _worst_spike(record: RunRecord, kind: str, killed_at: int | None) -> Spike | None:
    # A cgroup limit caps the cgroup's charge, which leaves out the mapped libraries RSS counts:
    # against the limit, compare the charge.
    charged = killed_at is not None and any(s.cgroup_bytes for s in record.memory_samples)
    measure = _MEASURES["cgroup" if charged else kind]
    found = _spikes.episodes(record, measure, steady=steady_state)
    if not found:
        return None
    last = found[-1]
    if killed_at is not None and killed_at > last.peak and _spikes.open_at_end(record, last):
        last.peak, last.killed = killed_at, True
    worst = max(found, key=lambda e: e.ratio)
    if worst.ratio < SPIKE_RATIO:
        return None
    return Spike(kind, charged, worst, len([e for e in found if e.ratio >= SPIKE_RATIO]))


def steady_state(baseline: _spikes.Baseline) -> float | None:
    """The training memory a spike is compared with: the median of MIN_TRAIN_SAMPLES samples
    or more; of a short phase, the highest of its samples when they agree (see SHORT_SPREAD);
    else None, no yardstick."""
    count = sum(n for _, n in baseline)
    if count >= MIN_TRAIN_SAMPLES:
        return weighted_median(baseline)
    values = [v for v, _ in baseline]
    if count < SHORT_MIN_SAMPLES or min(values) <= 0 or max(values) > (1 + SHORT_SPREAD) * min(values):
        return None
    return max(values)


RULES: tuple[Rule, ...] = (eval_memory_spike,)


# -- the wording ----------------------------------------------------------------------------
#: How a phase is named in a message (others: their name, with spaces).
PHASE_LABELS = {"eval": "evaluation", "predict": "prediction", "epoch_end": "epoch end"}


def message(spike: Spike) -> str:
    """'Memory at evaluation peaked at 4.0 GiB, 2.0x the training steady state of 2.0 GiB'."""
    worst = spike.worst
    label = PHASE_LABELS.get(worst.phase, worst.phase.replace("_", " "))
    memory = (
        "GPU memory"
        if spike.kind == "gpu"
        else ("Memory (the cgroup's charge)" if spike.charged else "Memory")
    )
    steady = worst.steady
    if worst.killed:
        return (
            f"{memory} at {label} reached the limit of {human_bytes(worst.peak)}, where the OOM killer "
            f"ended the run: at least {worst.ratio:.1f}x the training steady state of {human_bytes(steady)}"
        )
    return (
        f"{memory} at {label} peaked at {human_bytes(worst.peak)}, {worst.ratio:.1f}x the training "
        f"steady state of {human_bytes(steady)}"
    )
