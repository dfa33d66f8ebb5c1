"""RUN002 `accelerator-oom`: the framework's out-of-memory error of the accelerator.

Collector: the supervisor (`trainmedic run`) relays the trainer's log lines (the error and
its traceback, kept as `LogLine`s however chatty the run: `evidence.logtext`), the phases,
and `MemorySample`s with the trainer tree's GPU memory where NVML is available. The error's
own sizes (tried to allocate, capacity, free) are read from its line. An attempt ended this
way is not RUN009's.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainmedic.events import Event, LogLine, MemorySample, RunEnd, RunStart
from trainmedic.evidence import logtext as _logtext
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers import spikes as _spikes
from trainmedic.rules._helpers.attempts import AttemptView, attempt_suffix, attempts, during, phase_at_end
from trainmedic.units import human_bytes


def _example() -> list[Event]:
    """PyTorch's CUDA out-of-memory error on stderr, then exit 1."""
    lines = [
        "Traceback (most recent call last):",
        '  File "/home/u/train.py", line 42, in <module>',
        "    loss = model(x).sum()",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
        "capacity of 15.77 GiB of which 1.20 GiB is free.",
    ]
    return [
        RunStart(t=0.0, pid=100, command=["python", "train.py"]),
        *(LogLine(t=1.0 + i / 100, pid=100, stream="stderr", text=line) for i, line in enumerate(lines)),
        RunEnd(t=2.0, pid=100, exit_code=1),
    ]


SPEC = FindingSpec(
    code="RUN002",
    slug="accelerator-oom",
    severity=Severity.ERROR,
    title="Accelerator out of memory",
    what=(
        "The framework raised an out-of-memory error of the accelerator: CUDA/ROCm/MPS "
        "'out of memory', or TensorFlow's ResourceExhaustedError."
    ),
    why="The device's memory, not the host's, ran out: the run stops at that step.",
    example="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB ...",
    fix=(
        "Lower the per-device batch size and keep the effective batch with gradient "
        "accumulation, use bf16/fp16, or activation checkpointing."
    ),
    decided_in=("run events",),
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class DeviceOom:
    """One attempt's out-of-memory error of the device, and what was measured around it."""

    view: AttemptView
    line: str  # the error's log line, stripped
    phase: str | None
    epoch: int | None  # numbered from 1
    peak_gpu: int | None  # the trainer tree's peak GPU memory (None: not sampled)
    sizes: _logtext.OomSizes
    exception: str | None = None  # the traceback's exception type, when there is one
    user_frame: str | None = None

    def evidence(self) -> dict[str, object]:
        evidence: dict[str, object] = {
            "log_line": self.line,
            "phase": self.phase,
            "epoch": self.epoch,
            "peak_gpu_bytes": self.peak_gpu,
            "tried_to_allocate_bytes": self.sizes.requested,
            "device_total_bytes": self.sizes.capacity,
            "device_free_bytes": self.sizes.free,
        }
        if self.exception is not None:
            evidence.update(exception=self.exception, user_frame=self.user_frame)
        return evidence


# -- the decision ---------------------------------------------------------------------------
def accelerator_oom(record: RunRecord) -> list[Finding]:
    """The framework's out-of-memory error of the device, with the phase it came in and the
    trainer tree's peak GPU memory (NVML samples) beside the device's capacity."""
    found = []
    for view in attempts(record):
        line = _logtext.first_match(_logtext.ACCELERATOR_OOM, view.lines)
        if line is None:
            continue
        oom = _measure(record, view, line)
        found.append(SPEC.finding(message(oom), evidence=oom.evidence(), fix=fix(oom), epoch=oom.epoch))
    return found


def _measure(record: RunRecord, view: AttemptView, line: str) -> DeviceOom:
    tb = _logtext.parse_traceback(view.error_lines) or _logtext.parse_traceback(view.lines)
    phase, epoch_index = phase_at_end(record, view)
    peak_gpu = max((s.gpu_bytes or 0 for s in view.events if isinstance(s, MemorySample)), default=0)
    return DeviceOom(
        view=view,
        line=line.strip(),
        phase=phase,
        epoch=epoch_number(epoch_index),
        peak_gpu=peak_gpu or None,
        sizes=_logtext.accelerator_oom_sizes(line),
        exception=tb.exc_type if tb is not None else None,
        user_frame=str(tb.user_frame) if tb is not None and tb.user_frame else None,
    )


RULES: tuple[Rule, ...] = (accelerator_oom,)


# -- the wording ----------------------------------------------------------------------------
def message(oom: DeviceOom) -> str:
    """'The accelerator ran out of memory during eval of epoch 3; peak GPU memory of the trainer
    tree 14.9 GiB of 15.8 GiB: torch.OutOfMemoryError: CUDA out of memory. ...'."""
    held = ""
    if oom.peak_gpu:
        of = f" of {human_bytes(oom.sizes.capacity)}" if oom.sizes.capacity else ""
        held = f"; peak GPU memory of the trainer tree {human_bytes(oom.peak_gpu)}{of}"
    return (
        f"The accelerator ran out of memory{during(oom.phase, oom.epoch)}{attempt_suffix(oom.view)}"
        f"{held}: {oom.line[:200]}"
    )


def fix(oom: DeviceOom) -> str:
    """Out of device memory while evaluating: keep the outputs off the device."""
    if oom.phase is not None and oom.phase not in _spikes.TRAINING_PHASES:
        return (
            "The device ran out while evaluating: move outputs to the CPU (or reduce them to "
            "metrics) batch by batch instead of keeping them on the GPU, evaluate under "
            "torch.no_grad()/inference_mode with a smaller batch, and free training-only "
            "buffers before it."
        )
    return SPEC.fix
