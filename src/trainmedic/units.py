"""Numbers as people read them in messages, status lines and reports (stdlib only)."""

from __future__ import annotations

import signal

_STEPS = ("B", "KiB", "MiB", "GiB")


def human_bytes(n: float | None, missing: str = "unknown") -> str:
    """Binary units, one decimal from MiB up: `human_bytes(400 * 2**20) == "400.0 MiB"`."""
    if n is None:
        return missing
    for unit in _STEPS:
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit in ("B", "KiB") else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover - the loop returns at GiB


def signal_name(signum: int) -> str:
    """`SIGKILL` for 9; `signal 64` for a number this platform does not name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
