"""The machine: GPUs and driver (NVML, where a driver is), CPU, memory, user."""

from __future__ import annotations

import contextlib
import getpass
import os
from pathlib import Path
from typing import Any

from trainmedic import _osinfo


def gpus() -> dict[str, Any] | None:
    """GPUs and driver via NVML; None where there is no NVIDIA driver (never an error)."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError: no library / no driver on CPU machines
        return None
    try:
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            devices.append(
                {
                    "index": index,
                    "name": _text(pynvml.nvmlDeviceGetName(handle)),
                    "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
                    "memory_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(handle).total),
                    "compute_capability": f"{major}.{minor}",
                }
            )
        cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        return {
            "driver": _text(pynvml.nvmlSystemGetDriverVersion()),
            "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}",
            "devices": devices,
        }
    except Exception as exc:  # any NVML/framework failure is recorded, never raised
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        with contextlib.suppress(Exception):  # shutting down a half-initialised NVML
            pynvml.nvmlShutdown()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def cpu() -> dict[str, Any]:
    import psutil

    model = None
    try:
        # line by line, up to the first processor's model: the kernel writes /proc/cpuinfo as it
        # is read, and the whole file of a 100-core GPU server costs milliseconds to produce
        with Path("/proc/cpuinfo").open(encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "model": model or _processor() or _osinfo.uname()[2],
        "machine": _osinfo.uname()[2],
        "cores_logical": psutil.cpu_count(logical=True),
        "cores_physical": psutil.cpu_count(logical=False),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }


def total_memory() -> int:
    import psutil

    return int(psutil.virtual_memory().total)


def _processor() -> str:
    """Where /proc/cpuinfo names no model (not Linux): `platform.processor()`."""
    import platform

    return platform.processor()


def user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None
