"""Whether a run folder's run ended under supervision.

A folder whose supervisor recorded a start but no end did not end under supervision
(the supervisor is still going, or was killed, e.g. by the SIGKILL a scheduler sends at
a time limit): `unfinished_note` says which, so `diagnose` and `report` never present
such a folder as a finished run. Standard library and psutil only: the supervisor's
report path reads it, and must not load the log readers (numpy) for that.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from trainmedic.events import Event, RunEnd, RunStart
from trainmedic.runfolder import LIVE_STATE


def unfinished_note(folder: Path, events: Sequence[Event]) -> str | None:
    """None when every start the supervisor recorded has its end; else one sentence saying the run
    did not end under supervision, and whether its supervisor is still running (supervisor.json)."""
    ended = {(e.pid, e.attempt) for e in events if isinstance(e, RunEnd)}
    open_starts = [e for e in events if isinstance(e, RunStart) and (e.pid, e.attempt) not in ended]
    if not open_starts:
        return None
    last = max((e.t for e in events), default=open_starts[-1].t)
    until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(last))
    pid = open_starts[-1].pid
    if _supervisor_alive(folder / LIVE_STATE, pid):
        return (
            f"{folder}: the run is still going (supervisor PID {pid}); "
            f"the findings cover its events up to {until}"
        )
    return (
        f"{folder}: the run did not end under supervision: its supervisor (PID {pid}) stopped without "
        f"recording how the run ended (killed, e.g. by a scheduler's SIGKILL at a time limit); "
        f"the findings cover its events up to {until}"
    )


def _supervisor_alive(state_path: Path, pid: int) -> bool:
    """The supervisor that wrote supervisor.json runs on this machine now (same PID, same start)."""
    import psutil

    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
        if int(state["supervisor_pid"]) != pid:
            return False
        return abs(psutil.Process(pid).create_time() - float(state["supervisor_create_time"])) < 1.0
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        return False
