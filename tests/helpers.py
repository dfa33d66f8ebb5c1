"""Test helpers shared across test modules (real processes, no mocks)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainmedic.eventlog.reader import read_events
from trainmedic.events import GuardObservation
from trainmedic.instrument.channel import child_env
from trainmedic.record import RunRecord


@dataclass
class InstrumentedRun:
    result: subprocess.CompletedProcess[str]
    record: RunRecord
    events_path: Path


#: PyTorch 2.13's gloo worker sometimes aborts at interpreter exit, after its training and
#: `destroy_process_group()` (std::terminate on a still-joinable thread; seen here in about one
#: bare `torchrun --nproc-per-node 2` run in ten, without trainmedic). A run that ends so is
#: run once more: the tests judge trainmedic, not that race.
TORCH_EXIT_ABORT = "terminate called without an active exception"


def torch_exit_abort(result: subprocess.CompletedProcess[str]) -> bool:
    """The run failed only by PyTorch's exit-time abort (TORCH_EXIT_ABORT)."""
    return result.returncode != 0 and TORCH_EXIT_ABORT in (result.stderr or "") + (result.stdout or "")


def past_torch_exit_abort(
    attempt: Callable[[], subprocess.CompletedProcess[str]],
) -> subprocess.CompletedProcess[str]:
    """`attempt()` (which starts from a clean output), once more if PyTorch's exit-time abort ended it."""
    result = attempt()
    return attempt() if torch_exit_abort(result) else result


def run_instrumented(
    argv: list[str],
    tmp_path: Path,
    *,
    timeout: float = 300,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    shared_events: bool = False,
) -> InstrumentedRun:
    """Run a real command with the boot module active (as under `trainmedic run`, minus the
    supervisor) and return its output and the events its processes emitted.

    `shared_events`: other commands write into the same events file at the same time (the
    nodes of one job). Then the file is neither cleared nor the command rerun here: a lone
    rerun would delete the others' events and wait for partners that have finished; the
    caller clears the file once and reruns all of them together.
    """
    events_path = tmp_path / "events.jsonl"
    full_env = child_env(events_path)
    full_env.update(env or {})
    if argv and argv[0] == "python":
        argv = [sys.executable, *argv[1:]]

    def attempt() -> subprocess.CompletedProcess[str]:
        if not shared_events:
            events_path.unlink(missing_ok=True)
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=full_env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    result = attempt() if shared_events else past_torch_exit_abort(attempt)
    events = read_events(events_path).events if events_path.exists() else []
    return InstrumentedRun(result=result, record=RunRecord.of(events), events_path=events_path)


def records_by_case(record: RunRecord) -> dict[str, RunRecord]:
    """One interpreter's events cut at its `example_start` markers: one record per case.

    The test runners that run many cases in ONE instrumented interpreter (torch imported once:
    `tests/torch/run_examples.py`, `run_loads.py`, `run_resumes.py`, ...) send the marker
    before each case and a last one named `<end>`."""
    records: dict[str, RunRecord] = {}
    case, events = None, []
    for event in record.events:
        if isinstance(event, GuardObservation) and event.check == "example_start":
            if case is not None:
                records[case] = RunRecord.of(events)
            case, events = event.data["case"], []
        else:
            events.append(event)
    return records
