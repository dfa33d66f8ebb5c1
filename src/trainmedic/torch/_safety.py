"""A failure inside the guard turns the guard off (one line on stderr), never the training.

The one exception that passes through is `NonFiniteLossError`: raising it is what
`on_nonfinite="stop"` asks for.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from trainmedic.errors import TrainmedicError

P = ParamSpec("P")
R = TypeVar("R")


class NonFiniteLossError(TrainmedicError, RuntimeError):
    """Raised with `on_nonfinite="stop"` before the optimizer applies a NaN/Inf update."""

    def __init__(self, message: str, finding: dict[str, Any]) -> None:
        super().__init__(message)
        self.finding = finding


def part_never_breaks(method: Callable[P, R]) -> Callable[P, R | None]:
    """For a method of one of the monitor's parts (its `monitor` attribute): a failure turns
    the monitor off."""

    @functools.wraps(method)
    def safe(*args: P.args, **kwargs: P.kwargs) -> R | None:
        monitor = args[0].monitor  # type: ignore[attr-defined]
        if getattr(monitor, "broken", False):
            return None
        try:
            return method(*args, **kwargs)
        except NonFiniteLossError:
            raise
        except Exception as exc:
            turn_off(monitor, method.__name__, exc)
            return None

    return safe


def turn_off(monitor: Any, where: str, exc: Exception) -> None:
    """Turn the monitor off; a `NonFiniteLossError` (what "stop" asks for) passes through."""
    if isinstance(exc, NonFiniteLossError):
        raise exc
    monitor.broken = True
    sys.stderr.write(f"trainmedic: PyTorch guard turned off by an internal error in {where}: {exc!r}\n")


class quiet:
    """At exit a non-finite loss is reported, never raised."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: object, tb: object) -> bool:
        return isinstance(exc, NonFiniteLossError)
