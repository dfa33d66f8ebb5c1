"""RUN003 on every non-training phase, against the training before the spike; RUN009 naming
the loss blow-up behind an overflow. Event shapes measured on runs of benchmarks/foreign/."""

from __future__ import annotations

import signal

from trainmedic.events import (
    Event,
    LogLine,
    MemoryLimit,
    MemorySample,
    OomKill,
    PhaseEnd,
    PhaseStart,
    Step,
)
from trainmedic.rules.run.run003_eval_memory_spike import eval_memory_spike
from trainmedic.rules.run.run009_crashed import crashed

from .test_run_rules import MiB, stream

OVERFLOW = [
    "Traceback (most recent call last):",
    '  File "/work/lm.py", line 87, in <module>',
    '    print(f"valid ppl {math.exp(val_loss):8.2f}")',
    "OverflowError: math range error",
]


def epoch_with_predict(
    t: float, train_mib: list[int], predict_mib: int, *, close: bool = True
) -> list[Event]:
    """One Keras epoch as the instrumentation brackets it: train, then epoch_end > predict."""
    events: list[Event] = [PhaseStart(t=t, pid=1, phase="train", epoch=0)]
    events += [MemorySample(t=t + 0.5 * (i + 1), pid=9, rss_bytes=v * MiB) for i, v in enumerate(train_mib)]
    t_end = t + 0.5 * (len(train_mib) + 1)
    events += [
        PhaseEnd(t=t_end, pid=1, phase="train", epoch=0),
        PhaseStart(t=t_end, pid=1, phase="epoch_end", epoch=0),
        PhaseStart(t=t_end + 0.01, pid=1, phase="predict"),
        MemorySample(t=t_end + 0.3, pid=9, rss_bytes=predict_mib * MiB),
    ]
    if close:
        events += [
            PhaseEnd(t=t_end + 0.4, pid=1, phase="predict"),
            PhaseEnd(t=t_end + 0.5, pid=1, phase="epoch_end"),
        ]
    return events


def test_spike_is_measured_against_the_training_before_it() -> None:
    """After the first predict, RSS stays at what the spike left (the allocator keeps it):
    later training samples must not become the steady state the spike is compared with."""
    events = [
        *epoch_with_predict(10.0, [851, 859, 883], 1473),
        *epoch_with_predict(20.0, [1210, 1211], 1475),
        *epoch_with_predict(30.0, [1219, 1220], 1476),
    ]
    [finding] = eval_memory_spike(stream(*events))
    assert finding.evidence["phase"] == "predict"
    assert finding.evidence["train_median_bytes"] == 859 * MiB
    assert finding.evidence["ratio"] > 1.5
    assert finding.message.startswith("Memory at prediction peaked at 1.4 GiB, 1.7x")


def test_a_checkpoint_phase_counts_too() -> None:
    events: list[Event] = [PhaseStart(t=1.0, pid=1, phase="train", epoch=0)]
    events += [MemorySample(t=2.0 + i, pid=9, rss_bytes=300 * MiB) for i in range(4)]
    events += [
        PhaseEnd(t=6.0, pid=1, phase="train", epoch=0),
        PhaseStart(t=6.0, pid=1, phase="checkpoint", epoch=0),
        MemorySample(t=6.5, pid=9, rss_bytes=900 * MiB),
        PhaseEnd(t=7.0, pid=1, phase="checkpoint", epoch=0),
    ]
    [finding] = eval_memory_spike(stream(*events))
    assert finding.evidence["phase"] == "checkpoint"
    assert "at checkpoint peaked" in finding.message


def test_a_steady_evaluation_is_no_spike() -> None:
    events = [
        *epoch_with_predict(10.0, [850, 860, 870], 900),
        *epoch_with_predict(20.0, [880, 885, 890], 930),
    ]
    assert eval_memory_spike(stream(*events)) == []


def test_killed_in_predict_needs_at_least_the_limit() -> None:
    """The kill came between two samples: the phase needed more than the cgroup limit."""
    events: list[Event] = [MemoryLimit(t=0.1, limit_bytes=900 * MiB, source="memory-limit-option")]
    events += epoch_with_predict(10.0, [350, 352, 355], 600, close=False)
    events += [OomKill(t=99.0, count=1, scope="cgroup")]
    for e in events:
        if isinstance(e, MemorySample):
            e.cgroup_bytes = e.rss_bytes
    [finding] = eval_memory_spike(stream(*events, exit_code=137, sig=signal.SIGKILL))
    assert finding.evidence["killed_at_limit"] is True
    assert finding.evidence["peak_bytes"] == 900 * MiB
    assert "where the OOM killer ended the run" in finding.message


def test_overflow_after_a_loss_explosion_names_the_divergence() -> None:
    losses = [(1, 3.9), (10, 4943.5), (20, 11325.5), (28, 11197.6)]
    steps = [Step(t=float(s), step=s, epoch=0, metrics={"loss": v}) for s, v in losses]
    lines = [LogLine(t=40.0 + i * 0.01, stream="stderr", text=text) for i, text in enumerate(OVERFLOW)]
    [finding] = crashed(stream(*steps, *lines, exit_code=1))
    assert finding.evidence["likely_cause"]["code"] == "TRN002"
    assert "likely cause: the loss blew up before it (TRN002 loss-divergence)" in finding.message
    assert "consequence" in finding.fix


def test_overflow_without_a_loss_problem_names_no_cause() -> None:
    steps = [Step(t=float(s), step=s, epoch=0, metrics={"loss": 3.9 - 0.05 * s}) for s in range(1, 30)]
    lines = [LogLine(t=40.0 + i * 0.01, stream="stderr", text=text) for i, text in enumerate(OVERFLOW)]
    [finding] = crashed(stream(*steps, *lines, exit_code=1))
    assert "likely_cause" not in finding.evidence


def test_an_unrelated_crash_after_a_divergence_names_no_cause() -> None:
    losses = [(1, 3.9), (10, 4943.5), (20, 11325.5), (28, 11197.6)]
    steps = [Step(t=float(s), step=s, epoch=0, metrics={"loss": v}) for s, v in losses]
    text = [*OVERFLOW[:3], "KeyError: 'val_loss'"]
    lines = [LogLine(t=40.0 + i * 0.01, stream="stderr", text=t) for i, t in enumerate(text)]
    [finding] = crashed(stream(*steps, *lines, exit_code=1))
    assert "likely_cause" not in finding.evidence


def test_a_short_training_phase_still_gives_a_yardstick() -> None:
    """Epoch 1 trained for under a second (two samples that agree) and its prediction was
    OOM-killed at 1.9 GiB: no later epoch brings more samples, the highest of the two is the
    steady state. One sample, or two that still climb, give none."""

    def killed(train_mib: list[int]) -> list:
        events: list[Event] = [MemoryLimit(t=0.1, limit_bytes=1900 * MiB, source="memory-limit-option")]
        events += epoch_with_predict(10.0, train_mib, 1700, close=False)
        events += [OomKill(t=99.0, count=1, scope="cgroup")]
        for e in events:
            if isinstance(e, MemorySample):
                e.cgroup_bytes = e.rss_bytes
        return eval_memory_spike(stream(*events, exit_code=137, sig=signal.SIGKILL))

    [finding] = killed([860, 875])
    assert finding.evidence["train_median_bytes"] == 875 * MiB
    assert finding.evidence["train_samples"] == 2
    assert finding.evidence["killed_at_limit"] is True
    assert finding.evidence["baseline"] == "the highest of 2 agreeing training samples (a short phase)"
    assert finding.message.endswith("at least 2.2x the training steady state of 875.0 MiB")
    assert killed([860]) == []
    assert killed([600, 875]) == []  # a ramp: what training holds is not known
