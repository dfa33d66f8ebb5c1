"""The channel from an instrumented process to the supervisor: the run's events file.

Under `trainmedic run`, the supervisor sets TRAINMEDIC_EVENTS to the run's
`events.jsonl`; every process of the tree appends to it (one `os.write` per
line, O_APPEND), so events survive the trainer's death and need no socket or
thread. Outside `run`, `emit` is a no-op and explicit guards keep their events
in memory.

`child_env` is the channel's other end: the environment `trainmedic run` (and
tests, and `verify-resume`) start children with. The boot directory goes first on
PYTHONPATH (so its `sitecustomize` runs in every Python process of the tree,
launchers' children included), beside the events file to append to and where
trainmedic itself lives for interpreters of other virtual environments.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from trainmedic._osinfo import hostname
from trainmedic.eventlog.writer import EventWriter
from trainmedic.events import Event

EVENTS_ENV = "TRAINMEDIC_EVENTS"
INSTRUMENT_ENV = "TRAINMEDIC_INSTRUMENT"

_lock = threading.Lock()
# In-process listeners (a notebook's inline display): told of every event this process emits.
_listeners: list[Callable[[Event], None]] = []
_writer: EventWriter | None = None
_writer_pid: int | None = None


def _rank_from_env() -> int | None:
    for name in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"):
        value = os.environ.get(name)
        if value is not None and value.strip().lstrip("-").isdigit():
            return int(value)
    return None


RANK: int | None = _rank_from_env()
# Where a launcher gives a worker its rank only once training has begun (Ray Train: the
# rank lives in the worker's train context, not in its environment), the integration adds
# a function that reads it; the first rank one returns becomes this process's RANK.
_rank_readers: list[Callable[[], int | None]] = []
NODE: str = os.environ.get("TRAINMEDIC_NODE") or hostname()


def events_path() -> str | None:
    """The events file of the supervising run, or None when not supervised or turned off."""
    if os.environ.get(INSTRUMENT_ENV, "1") == "0":
        return None
    return os.environ.get(EVENTS_ENV) or None


def is_supervised() -> bool:
    return events_path() is not None


def boot_dir() -> Path:
    """The folder whose `sitecustomize` turns instrumentation on in a Python process."""
    return Path(__file__).resolve().parent / "boot"


def child_env(
    events_file: str | os.PathLike[str],
    base: Mapping[str, str] | None = None,
    *,
    instrument: bool = True,
) -> dict[str, str]:
    """A copy of `base` (default: os.environ) that instruments Python children.

    With `instrument=False` only TRAINMEDIC_INSTRUMENT=0 is added: children run
    exactly as they would bare. (Paths are resolved here, when a tree is started,
    not when an instrumented process imports this module.)
    """
    env = dict(os.environ if base is None else base)
    if not instrument:
        env[INSTRUMENT_ENV] = "0"
        return env
    parts = [str(boot_dir()), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    env[EVENTS_ENV] = str(Path(events_file).resolve())
    env["TRAINMEDIC_PKG_DIR"] = str(Path(__file__).resolve().parents[2])  # the folder holding `trainmedic/`
    env.pop(INSTRUMENT_ENV, None)
    return env


def _get_writer() -> EventWriter | None:
    global _writer, _writer_pid
    pid = os.getpid()
    if _writer is not None and _writer_pid == pid:
        return _writer
    path = events_path()
    if path is None:
        return None
    with _lock:
        if _writer is None or _writer_pid != pid:
            if _writer_pid is None:
                atexit.register(_flush_at_exit)
            _writer = EventWriter(path)
            _writer_pid = pid
    return _writer


def _flush_at_exit() -> None:
    """The open bucket of step events (`eventlog.steps`), written when this process ends."""
    writer = _writer
    if writer is not None and _writer_pid == os.getpid():
        with contextlib.suppress(OSError):
            writer.flush()


def emit(event: Event) -> None:
    """Send one event to the supervisor, tagged with this process's rank and node.

    Never raises: losing an event must not break the user's training.
    """
    for listener in _listeners:
        with contextlib.suppress(Exception):
            listener(event)
    writer = _get_writer()
    if writer is None:
        return
    if event.rank is None:
        event.rank = current_rank()
    if event.node is None:
        event.node = NODE
    with contextlib.suppress(OSError):
        writer.emit(event)


def add_rank_reader(reader: Callable[[], int | None]) -> None:
    """Ask `reader` for this process's rank while it is unknown (see `_rank_readers`)."""
    if reader not in _rank_readers:
        _rank_readers.append(reader)


def current_rank() -> int | None:
    """This process's rank: from its environment, else from the first rank reader that knows
    it (then kept, so later events and guard checks read it from RANK)."""
    global RANK
    if RANK is None:
        for reader in _rank_readers:
            with contextlib.suppress(Exception):
                RANK = reader()
            if RANK is not None:
                break
    return RANK


def add_listener(listener: Callable[[Event], None]) -> None:
    """Tell `listener` of every event this process emits (before it is written)."""
    if listener not in _listeners:
        _listeners.append(listener)


def remove_listener(listener: Callable[[Event], None]) -> None:
    with contextlib.suppress(ValueError):
        _listeners.remove(listener)
