"""The run folder: its layout, where folders go, and how it is written and read back.

`trainmedic run` writes one folder per run; `report`, `diagnose`, `diff`, `ps`, `stop` and the
notebook extension read it back. They all take the names, and the rules for creating, finding,
writing and reading folders, from here, so the layout is spelled once (docs/DESIGN.md):

    events.jsonl    every event, one JSON object a line (the supervisor's and the trainer's)
    output.log      the trainer's stdout and stderr
    findings.json   the diagnosis at the end
    manifest.json   the environment and the run's own facts
    report.html     the report
    supervisor.json the live supervisor's state (PIDs), so `trainmedic stop RUN_DIR` works
    stop.request    written by `trainmedic stop`, read by the supervisor

Beside the folders, live runs register in a state folder (`register`), which `trainmedic ps`
and `stop` read.

A folder may come from a supervisor that was killed half-way: a cut last event line, no
findings.json, no manifest, a start without an end (`unfinished_note`). Readers still read what
is there; what cannot be trusted (a findings.json or manifest.json that is not JSON of the
expected shape) is a usage error naming the file in the report (`load_run_folder`), and is
passed over by the tolerant readers (`read_json`, `replay`).

Standard library and trainmedic's core only (psutil is imported when a supervisor's liveness
is asked): the supervisor, the CLI and the notebook kernel all read it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from trainmedic import _osinfo
from trainmedic._version import __version__
from trainmedic.atomicfile import write_text_atomic
from trainmedic.errors import UsageError
from trainmedic.events import EnvironmentManifest, Event, RunEnd, RunStart, read_events
from trainmedic.findings import Finding
from trainmedic.record import RunRecord

EVENTS = "events.jsonl"
OUTPUT = "output.log"
FINDINGS = "findings.json"
MANIFEST = "manifest.json"
REPORT = "report.html"
LIVE_STATE = "supervisor.json"
STOP_REQUEST = "stop.request"

RUNS_DIR_ENV = "TRAINMEDIC_RUNS_DIR"  # where run folders go without --out (e.g. a notebook kernel's)
RUN_DIR_ENV = "TRAINMEDIC_RUN_DIR"  # set by the supervisor for its trainer: the run's own folder
STATE_DIR_ENV = "TRAINMEDIC_STATE_DIR"  # where live runs register (`state_dir`)

LOG_TAIL_BYTES = 256 * 1024
LOG_LINES = 60
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
_FAILURE = re.compile(r"Killed|out of memory|Error:|Exception:")


# -- where run folders go, and how they are found ----------------------------------------------
def runs_base() -> Path:
    """Where run folders go without `--out`: $TRAINMEDIC_RUNS_DIR, else ./runs."""
    return Path(os.environ.get(RUNS_DIR_ENV) or "runs")


def default_name(command: Sequence[str]) -> str:
    """'train' for `python train.py`, else the program's name."""
    for arg in command[1:]:
        if arg.endswith(".py"):
            return PurePath(arg).stem
    return PurePath(command[0]).stem if command else "run"


def make_run_dir(out: Path | None, name: str, base: Path = Path("runs")) -> Path:
    """`--out` as given, else <base>/<UTC timestamp>-<name>/ (suffixed if taken)."""
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        return out
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "run"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = base / f"{stamp}-{safe}"
    for n in range(2, 1000):
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            path = base / f"{stamp}-{safe}-{n}"
    raise FileExistsError(path)


def is_run_folder(path: Path) -> bool:
    """A folder `trainmedic run` wrote: it holds events.jsonl."""
    return path.is_dir() and (path / EVENTS).is_file()


def run_folders(base: Path) -> list[Path]:
    """The run folders directly under `base` that have a manifest, by name; none when `base`
    is not a folder. A folder without manifest.json is one whose supervisor never got going."""
    if not base.is_dir():
        return []
    return sorted(d for d in base.iterdir() if (d / MANIFEST).is_file())


# -- its JSON files ------------------------------------------------------------------------------
def read_json(path: Path) -> dict[str, Any] | None:
    """A run folder's JSON object; None when absent, unreadable or not an object (a folder may
    be from a supervisor killed before it wrote the file)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write JSON atomically (temp file + rename): a reader never sees half a file."""
    write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


def build_manifest(
    *,
    command: Sequence[str],
    cwd: str,
    name: str,
    started: float,
    ended: float | None = None,
    exit_code: int | None = None,
    signal: int | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """THE place the run's own facts are put in the manifest. The supervisor lays them over the
    environment capture (`envinfo.capture_manifest`), whose fields stay at the top level so
    `trainmedic diff` and `trainmedic env` read one shape."""
    manifest: dict[str, Any] = {
        "trainmedic": __version__,
        "name": name,
        "command": list(command),
        "cwd": cwd,
        "start": _iso(started),
        "end": _iso(ended) if ended is not None else None,
        "duration_s": round(ended - started, 3) if ended is not None else None,
        "exit_code": exit_code,
        "signal": signal,
        "host": {
            "hostname": _osinfo.hostname(),
            "system": _osinfo.uname()[0],
            "release": _osinfo.uname()[1],
            "machine": _osinfo.uname()[2],
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
        },
    }
    manifest.update(extra or {})
    return manifest


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


# -- the registry of live runs (`trainmedic ps`, `stop`) ---------------------------------------
def state_dir() -> Path:
    """Where live runs register: $TRAINMEDIC_STATE_DIR, else a per-user runtime folder."""
    configured = os.environ.get(STATE_DIR_ENV)
    if configured:
        return Path(configured)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "trainmedic" if runtime else Path.home() / ".cache" / "trainmedic" / "live"


def register(supervisor_pid: int, run_dir: Path) -> Path:
    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    entry = folder / f"{supervisor_pid}.json"
    write_json(entry, {"run_dir": str(run_dir.resolve()), "supervisor_pid": supervisor_pid})
    return entry


def registered() -> Iterator[tuple[Path, Path]]:
    """(registry entry, run folder) of every registered run, live or stale."""
    folder = state_dir()
    if not folder.is_dir():
        return
    for entry in sorted(folder.glob("*.json")):
        data = read_json(entry)
        if data and "run_dir" in data:
            yield entry, Path(str(data["run_dir"]))


def unregister(entry: Path) -> None:
    with contextlib.suppress(OSError):
        entry.unlink()


# -- whether its run ended under supervision ---------------------------------------------------
def unfinished_note(folder: Path, events: Sequence[Event]) -> str | None:
    """None when every start the supervisor recorded has its end; else one sentence saying the run
    did not end under supervision, and whether its supervisor is still running (supervisor.json).

    A folder whose supervisor recorded a start but no end did not end under supervision (the
    supervisor is still going, or was killed, e.g. by the SIGKILL a scheduler sends at a time
    limit): `diagnose` and `report` never present such a folder as a finished run."""
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


# -- reading it back: what `diagnose` replays --------------------------------------------------
@dataclass(slots=True)
class Replay:
    """A run folder's events as far as they read, what had to be skipped, and whether it ended."""

    folder: Path
    events: list[Event]
    skipped: list[str]
    note: str | None  # `unfinished_note`: set when the run did not end under supervision


def replay(path: Path) -> Replay:
    """The events of a run folder (or of its events.jsonl itself) as far as they read, with its
    manifest.json, when present, as an `EnvironmentManifest` event at the run's start."""
    events_path = path / EVENTS if path.is_dir() else path
    folder = events_path.parent
    result = read_events(events_path)
    events: list[Event] = list(result.events)
    skipped: list[str] = []
    if result.skipped_lines:
        shown = ", ".join(map(str, result.skipped_lines[:5]))
        skipped.append(f"{EVENTS}: {len(result.skipped_lines)} unreadable line(s) ({shown})")
    if result.truncated_tail:
        skipped.append(f"{EVENTS}: the last line was cut mid-write")
    manifest = read_json(folder / MANIFEST)
    if manifest is not None:
        start = min((e.t for e in events), default=0.0)
        events.append(EnvironmentManifest(manifest=manifest, t=start, pid=0))
    return Replay(folder=folder, events=events, skipped=skipped, note=unfinished_note(folder, events))


# -- reading it back: what the report shows ----------------------------------------------------
@dataclass(slots=True)
class RunFolder:
    """A run folder read back: its events, findings, manifest and last log lines."""

    path: Path
    record: RunRecord
    findings: list[Finding]
    manifest: dict[str, Any]
    log_tail: list[str]
    note: str | None = None  # set when the run did not end under supervision


def load_run_folder(run_dir: str | os.PathLike[str]) -> RunFolder:
    """Everything the report needs from a run folder; UsageError for what is not one."""
    path = Path(run_dir)
    if not path.is_dir():
        raise UsageError(f"{path}: not a directory; expected a run folder holding {EVENTS}")
    events_file = path / EVENTS
    if not events_file.is_file():
        raise UsageError(f"{path}: no {EVENTS} here; expected a run folder written by `trainmedic run`")
    record = RunRecord.of(read_events(events_file).events)
    note = unfinished_note(path, record.events)
    return RunFolder(
        path=path,
        record=record,
        findings=_findings(path / FINDINGS, record, ended=note is None),
        manifest=_manifest(path / MANIFEST),
        log_tail=_log_tail(path / OUTPUT, record),
        note=note,
    )


def _load_json(path: Path, expected: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not readable as JSON ({exc}); expected {expected}") from exc


def _findings(path: Path, record: RunRecord, *, ended: bool = True) -> list[Finding]:
    """findings.json of an ended run; else what the rules find in the events (as `diagnose` would):
    a run that did not end may have events after the findings.json written during it."""
    if not ended or not path.exists():
        from trainmedic.registry import run_rules

        return run_rules(record)
    expected = '{"findings": [...]} as written by `trainmedic run`'
    data = _load_json(path, expected)
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        raise UsageError(f"{path}: expected {expected}")
    try:
        return [Finding.from_dict(item) for item in data["findings"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{path}: a finding is malformed ({exc!r}); expected {expected}") from exc


def _manifest(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    data = _load_json(path, "a JSON object describing the environment")
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a JSON object describing the environment")
    return data


def _log_tail(path: Path, record: RunRecord) -> list[str]:
    if path.is_file():
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
            text = f.read().decode("utf-8", errors="replace")
        lines = clean_lines(text.splitlines())
    else:
        lines = clean_lines(record.last_log_lines(LOG_TAIL_BYTES // 100))
    return lines_around_failure(lines)


def clean_lines(lines: Sequence[str]) -> list[str]:
    """Terminal output as a reader saw it: colours removed, progress bars at their last redraw."""
    cleaned = []
    for raw in lines:
        line = _ANSI.sub("", raw)
        if "\r" in line:
            line = line.rstrip("\r").rsplit("\r", 1)[-1]
        cleaned.append(line.replace("\b", ""))
    return cleaned


def lines_around_failure(lines: Sequence[str], count: int = LOG_LINES) -> list[str]:
    """The last `count` lines; when the last traceback or error began before them, its first
    lines too (a long TensorFlow traceback would otherwise hide where it started)."""
    first_tail = max(0, len(lines) - count)
    tail = list(lines[first_tail:])
    hits = [i for i, line in enumerate(lines) if _TRACEBACK.search(line)]
    hits = hits or [i for i, line in enumerate(lines) if _FAILURE.search(line)]
    if not hits or hits[-1] >= first_tail:
        return tail
    head = list(lines[max(0, hits[-1] - 3) : min(first_tail, hits[-1] + count // 3)])
    gap = first_tail - (hits[-1] + count // 3)
    return head + ([f"... ({gap} lines) ..."] if gap > 0 else []) + tail
