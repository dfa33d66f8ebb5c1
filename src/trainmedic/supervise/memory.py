"""Memory and CPU of the trainer tree, sampled cheaply and adaptively.

One sample reads RSS and CPU times of the processes already known (a few
/proc reads each); the tree itself is re-walked only every
few seconds, because walking it reads every process on the machine. While
memory is flat the interval stretches up to 4x `--sample-interval`; any change
of more than 5 % snaps it back, so a spike at epoch end is sampled densely. The first
sample after `densely` is marked as opening a stretch (`eventlog.samples.OPENS`): the writer, which
merges a long run's samples into buckets, never merges it with the samples before it.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import psutil

from trainmedic.eventlog.samples import OPENS
from trainmedic.events import MemorySample
from trainmedic.supervise.cgroup import CgroupInfo
from trainmedic.supervise.gpu import GpuProbe, NullProbe
from trainmedic.supervise.tree import Proc

_FLAT = 0.02
_MOVING = 0.05
_STRETCH = 1.5
_MAX_STRETCH = 4.0


@dataclass(slots=True)
class TreeSampler:
    """Samples memory (RSS per process, cgroup usage, GPU per process) and tree CPU."""

    base_interval: float = 0.5
    gpu: GpuProbe = field(default_factory=NullProbe)
    cgroup: CgroupInfo | None = None
    interval: float = 0.0
    _cpu: dict[int, float] = field(default_factory=dict)
    _last_t: float | None = None
    _last_rss: int | None = None
    gpu_percent: float | None = None  # utilization of the tree's GPUs at the last sample
    _opens: bool = True  # the next sample opens a stretch (a phase, a process): never merged back

    def __post_init__(self) -> None:
        self.interval = self.base_interval

    def sample(self, procs: dict[int, Proc]) -> MemorySample:
        now = time.monotonic()
        rss: dict[str, int] = {}
        cpu_now: dict[int, float] = {}
        for pid, proc in procs.items():
            with contextlib.suppress(psutil.Error), proc.handle.oneshot():
                rss[str(pid)] = proc.handle.memory_info().rss
                times = proc.handle.cpu_times()
                cpu_now[pid] = times.user + times.system
        cpu_percent = self._cpu_percent(cpu_now, now)
        gpu = self.gpu.used_by(set(procs)) if procs else {}
        self.gpu_percent = self.gpu.utilization(set(procs)) if gpu else None
        total = sum(rss.values())
        self._adapt(total)
        opens, self._opens = self._opens, False
        return MemorySample(
            rss_bytes=total,
            processes=rss,
            cgroup_bytes=self.cgroup.usage_bytes() if self.cgroup else None,
            limit_bytes=self.cgroup.limit_bytes if self.cgroup else None,
            gpu_bytes=sum(gpu.values()) if gpu else None,
            gpu_processes={str(k): v for k, v in gpu.items()},
            cpu_percent=cpu_percent,
            summary={OPENS: True} if opens else None,
        )

    def _cpu_percent(self, cpu_now: dict[int, float], now: float) -> float | None:
        """CPU of the tree since the last sample, in % of one core (processes new since then
        count from zero, so a fresh worker's start-up counts as activity)."""
        previous, last_t = self._cpu, self._last_t
        self._cpu, self._last_t = cpu_now, now
        if last_t is None or now <= last_t:
            return None
        used = sum(max(0.0, t - previous.get(pid, 0.0)) for pid, t in cpu_now.items())
        return round(100.0 * used / (now - last_t), 1)

    def densely(self) -> None:
        """Sample at the base interval again (a new phase, a new process), starting with the
        next sample: that one only sets the reference, so it cannot stretch the interval at once."""
        self.interval = self.base_interval
        self._last_rss = None
        self._opens = True  # the writer's bucket of samples (`eventlog.samples`) ends before it

    def _adapt(self, total: int) -> None:
        last, self._last_rss = self._last_rss, total
        if not last:
            return
        change = abs(total - last) / last
        if change > _MOVING:
            self.interval = self.base_interval
        elif change < _FLAT:
            self.interval = min(self.interval * _STRETCH, self.base_interval * _MAX_STRETCH)


@dataclass(slots=True)
class HangWatch:
    """Decides "hung": no progress (output, events) and tree CPU under `cpu_threshold` % of one
    core, continuously for `timeout` seconds. Fires once per idle stretch."""

    timeout: float
    cpu_threshold: float = 5.0
    _last_active: float = field(default_factory=time.monotonic)
    _fired: bool = False

    def update(
        self,
        *,
        progressed: bool,
        cpu_percent: float | None,
        gpu_percent: float | None = None,
        now: float | None = None,
    ) -> float | None:
        """Feed one observation; returns the idle seconds when a hang is declared, else None.
        A busy GPU counts as activity: a trainer waiting on its kernels may use no CPU."""
        now = time.monotonic() if now is None else now
        busy = cpu_percent is None or cpu_percent >= self.cpu_threshold
        busy = busy or (gpu_percent is not None and gpu_percent >= self.cpu_threshold)
        if progressed or busy:
            self._last_active = now
            self._fired = False
            return None
        idle = now - self._last_active
        if self.timeout > 0 and idle >= self.timeout and not self._fired:
            self._fired = True
            return idle
        return None
