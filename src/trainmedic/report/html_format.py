"""Small formatters shared by the report sections: bytes, durations, values, signals."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from trainmedic.units import human_bytes

# Added to the `epoch` of events before showing it: events count epochs from 0 (as framework
# callbacks do), people and findings from 1 (as frameworks print "Epoch 1/12"). See events.py.
EPOCH_DISPLAY_OFFSET = 1


def escape(text: str) -> str:
    """`html.escape(text, quote=True)`, the same replacements in the same order: importing the
    `html` package loads its table of 2,231 named entities, which the report never reads
    (about 2 ms of every `trainmedic run`)."""
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#x27;")
    )


def shown_epoch(epoch: int) -> int:
    return epoch + EPOCH_DISPLAY_OFFSET


def byte_unit(peak: float) -> tuple[str, int]:
    """The unit a memory axis reads best in: GiB from 1 GiB up, else MiB."""
    return ("GiB", 2**30) if peak >= 2**30 else ("MiB", 2**20)


def fmt_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if seconds < 60:
        return f"{seconds:.1f} s"
    total = round(seconds)
    h, rem = divmod(total, 3600)
    m, s = divmod(rem, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s"


def fmt_value(value: Any, limit: int = 300) -> str:
    """An evidence value as short text: numbers compact, containers as JSON."""
    if isinstance(value, bool) or value is None:
        shown = json.dumps(value)
    elif isinstance(value, float):
        shown = f"{value:.6g}"
    elif isinstance(value, (int, str)):
        shown = str(value)
    elif isinstance(value, (Mapping, list, tuple)):
        shown = json.dumps(value, default=str)
    else:
        shown = str(value)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def fmt_number(value: float) -> str:
    """A metric value for an axis or a label: short and exact enough."""
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    if abs(value) >= 1e5 or abs(value) < 1e-3:
        return f"{value:.2g}"
    return f"{value:.4g}"


def fmt_bytes(n: float | None) -> str:
    return human_bytes(n, missing="-")
