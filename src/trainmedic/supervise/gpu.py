"""GPU memory per process, behind one interface: NVML where a GPU is, nothing where not.

`GpuProbe.used_by(pids)` returns the accelerator memory each process of the
trainer tree holds. `NvmlProbe` asks the NVIDIA driver (nvidia-ml-py);
`NullProbe` is what a machine without NVML gets (never an error);
`FakeGpuProbe` stands in for the hardware in tests on machines without a GPU,
through the same interface the sampler uses.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Protocol


class GpuProbe(Protocol):
    def used_by(self, pids: Collection[int]) -> dict[int, int]:
        """Accelerator bytes held by each of `pids` (absent: holds none or unknown)."""
        ...

    def utilization(self, pids: Collection[int]) -> float | None:
        """Highest utilization (%) of the devices where `pids` hold memory; None if unknown.
        A trainer waiting on its GPU can use no CPU: this keeps it from looking hung."""
        ...

    def close(self) -> None: ...


class NullProbe:
    """No accelerator visible: no GPU memory is reported."""

    def used_by(self, pids: Collection[int]) -> dict[int, int]:
        return {}

    def utilization(self, pids: Collection[int]) -> float | None:
        return None

    def close(self) -> None:
        return None


class FakeGpuProbe:
    """A fixed table pid -> bytes, for tests of the sampling path on GPU-less machines."""

    def __init__(self, table: Mapping[int, int], busy_percent: float | None = None) -> None:
        self.table = dict(table)
        self.busy_percent = busy_percent
        self.calls = 0

    def used_by(self, pids: Collection[int]) -> dict[int, int]:
        self.calls += 1
        return {pid: used for pid, used in self.table.items() if pid in pids}

    def utilization(self, pids: Collection[int]) -> float | None:
        return self.busy_percent if any(pid in pids for pid in self.table) else None

    def close(self) -> None:
        return None


class NvmlProbe:
    """GPU memory of processes from the NVIDIA driver (all devices, compute and graphics)."""

    def __init__(self) -> None:
        import pynvml

        self._nvml: Any = pynvml
        pynvml.nvmlInit()
        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        self._devices_of_tree: list[Any] = []

    def used_by(self, pids: Collection[int]) -> dict[int, int]:
        used: dict[int, int] = {}
        self._devices_of_tree = []
        for handle in self._handles:
            for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                try:
                    running = getattr(self._nvml, getter)(handle)
                except self._nvml.NVMLError:
                    continue
                for proc in running:
                    memory = proc.usedGpuMemory
                    if proc.pid in pids and isinstance(memory, int):
                        used[proc.pid] = used.get(proc.pid, 0) + memory
                        if handle not in self._devices_of_tree:
                            self._devices_of_tree.append(handle)
        return used

    def utilization(self, pids: Collection[int]) -> float | None:
        """Of the devices the last `used_by` found the tree on (call that first)."""
        rates = []
        for handle in self._devices_of_tree:
            try:
                rates.append(float(self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
            except self._nvml.NVMLError:
                continue
        return max(rates) if rates else None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()


# Where an NVIDIA driver shows itself on Linux (bare metal, containers, WSL2): without any,
# importing nvidia-ml-py and failing nvmlInit would only cost start-up time.
_DRIVER_TRACES = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/usr/lib/wsl/lib/libnvidia-ml.so.1")


def driver_may_exist() -> bool:
    if not sys.platform.startswith("linux"):
        return True
    return any(Path(trace).exists() for trace in _DRIVER_TRACES)


def default_probe() -> GpuProbe:
    """NVML when the library and a driver are present, else the null probe. Never raises."""
    if not driver_may_exist():
        return NullProbe()
    try:
        probe = NvmlProbe()
    except Exception:  # no nvidia-ml-py, no driver, no device: all mean "no GPU here"
        return NullProbe()
    if not probe._handles:
        probe.close()
        return NullProbe()
    return probe
