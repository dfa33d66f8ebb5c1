"""Ray Train: every worker's `ray.train.report(metrics)` becomes an event tagged with its rank.

Under `trainmedic run -- python ray_train_script.py` on one machine, Ray's worker
processes descend from the driver, so the boot module is active in them and this
module's `install` wraps `ray.train.report` when they import `ray.train`: each
report goes out as an `Epoch` (when the metrics carry an integer `epoch`) or a
`Step`, with the worker's world rank, and the worker announces itself once with
that rank. The dynamics rules then read per-rank curves as they do for torchrun.

Outside `run`, call `trainmedic.ray.report(metrics)` in place of `ray.train.report`
to get the same events where TRAINMEDIC_EVENTS points (e.g. a shared run folder
on a multi-node cluster: set it in the `runtime_env` of the workers).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import itertools
import os
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from trainmedic.events import Epoch, Event, ProcessSpawn, Step
from trainmedic.instrument import channel

__all__ = ["install", "report", "report_event"]

_ATTR = "__trainmedic_wrapped__"
_counter = itertools.count(1)
_announced = False


def report(metrics: Mapping[str, Any], *args: Any, **kwargs: Any) -> Any:
    """`ray.train.report` plus a trainmedic event for the metrics (explicit use)."""
    import ray.train

    report_event(metrics)
    original = getattr(ray.train.report, "__wrapped__", ray.train.report)
    return original(metrics, *args, **kwargs)


def report_event(metrics: Mapping[str, Any]) -> Event:
    """Emit the event for one report from this worker (and announce the worker once)."""
    global _announced
    rank = _world_rank()
    if not _announced:
        _announced = True
        channel.emit(ProcessSpawn(ppid=os.getppid(), role="worker", source="announce", rank=rank))
    numbers = {
        str(k): float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "epoch"
    }
    epoch = metrics.get("epoch")
    event: Event
    if isinstance(epoch, int) and not isinstance(epoch, bool):
        event = Epoch(epoch=epoch, metrics=numbers, rank=rank)
    else:
        step = metrics.get("step")
        number = step if isinstance(step, int) and not isinstance(step, bool) else next(_counter)
        numbers.pop("step", None)
        event = Step(step=number, metrics=numbers, rank=rank)
    channel.emit(event)
    return event


def _world_rank() -> int | None:
    rank = _train_rank()
    return rank if rank is not None else channel.RANK


def _train_rank() -> int | None:
    """The world rank of this Ray Train worker; None in the driver and Ray's other processes."""
    try:
        import ray.train

        if not _in_train_worker():
            return None
        return int(ray.train.get_context().get_world_rank())
    except Exception:  # not inside a Ray Train worker
        return None


def _in_train_worker() -> bool:
    """Whether this process runs a Ray Train worker (Train v2, else v1); False where this Ray
    has neither check. Asked first because outside a worker Train v1's context answers rank 0
    (with a warning) where v2's raises."""
    for module in ("ray.train.v2._internal.util", "ray.train._internal.session"):
        with contextlib.suppress(Exception):
            if importlib.import_module(module)._in_ray_train_worker():
                return True
    return False


def install(module: ModuleType) -> None:
    """Wrap `ray.train.report` (called when `ray.train` is imported under `trainmedic run`)."""
    original = getattr(module, "report", None)
    if original is None or getattr(original, _ATTR, False):
        return
    # the torch guard's steps and checks in this worker then carry its Ray rank too
    channel.add_rank_reader(_train_rank)
    setattr(module, "report", _wrapped(original))  # noqa: B010


def _wrapped(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapped(metrics: Mapping[str, Any], *args: Any, **kwargs: Any) -> Any:
        with contextlib.suppress(Exception):  # trainmedic must never break the user's report
            report_event(metrics)
        return original(metrics, *args, **kwargs)

    setattr(wrapped, _ATTR, True)
    return wrapped
