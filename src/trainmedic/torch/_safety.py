"""A failure inside the guard costs what failed, never the training, and never goes unsaid.

A sampled check or a once-a-pass part that fails (a tensor kind or a library the guard does
not know) loses that call: the guard goes on, and every other check with it (`contained`,
`part_never_breaks`). A failure in the per-step bookkeeping of the hooks turns the guard off
(`turn_off`): the steps it counts could no longer be trusted. Either way the first failure
of each place is one line on stderr and a `guard_check_failed` observation, which
RUN011 reports as an info among the findings.

The one exception that passes through is `NonFiniteLossError`: raising it is what
`on_nonfinite="stop"` asks for.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from trainmedic.errors import TrainmedicError
from trainmedic.rules.run import run011_guard_check_failed as run011

P = ParamSpec("P")
R = TypeVar("R")


class NonFiniteLossError(TrainmedicError, RuntimeError):
    """Raised with `on_nonfinite="stop"` before the optimizer applies a NaN/Inf update."""

    def __init__(self, message: str, finding: dict[str, Any]) -> None:
        super().__init__(message)
        self.finding = finding


def part_never_breaks(method: Callable[P, R]) -> Callable[P, R | None]:
    """For a method of one of the monitor's parts (its `monitor` attribute): a failure costs
    that call (`check_failed`); the guard goes on."""

    @functools.wraps(method)
    def safe(*args: P.args, **kwargs: P.kwargs) -> R | None:
        monitor = args[0].monitor  # type: ignore[attr-defined]
        if getattr(monitor, "broken", False):
            return None
        return contained(monitor, method.__name__, method, *args, **kwargs)

    return safe


def contained(monitor: Any, where: str, call: Callable[..., R], *args: Any, **kwargs: Any) -> R | None:
    """`call(...)`, one check of a sampled step: a failure costs it (`check_failed`), None."""
    try:
        return call(*args, **kwargs)
    except NonFiniteLossError:
        raise
    except Exception as exc:
        check_failed(monitor, where, exc)
        return None


def check_failed(monitor: Any, where: str, exc: Exception, *, guard_off: bool = False) -> None:
    """Say a failure once per place: one line on stderr, one `guard_check_failed` observation."""
    said = f"{run011.OBSERVATION}:{where}"
    if said in monitor.reported:
        return
    monitor.reported.add(said)
    what = "turned off" if guard_off else "skipped a check"
    sys.stderr.write(f"trainmedic: PyTorch guard {what} by an internal error in {where}: {exc!r}\n")
    data = {"part": where, "error": repr(exc)[:300], "guard_off": guard_off, "step": monitor.step}
    with contextlib.suppress(Exception):  # a sink that fails too: stderr has said it
        monitor.observe(run011.OBSERVATION, data, once=False, step=monitor.step or None)


def turn_off(monitor: Any, where: str, exc: Exception) -> None:
    """Turn the monitor off; a `NonFiniteLossError` (what "stop" asks for) passes through."""
    if isinstance(exc, NonFiniteLossError):
        raise exc
    monitor.broken = True
    check_failed(monitor, where, exc, guard_off=True)


class quiet:
    """At exit a non-finite loss is reported, never raised."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: object, tb: object) -> bool:
        return isinstance(exc, NonFiniteLossError)
