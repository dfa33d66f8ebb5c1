"""`%load_ext trainmedic`: findings in the notebook as they happen, and `%trainmedic last`.

Two sources, one display:
- a finding a guard decides in-process (a NaN loss at its step) reaches the notebook the
  moment it is emitted, in the cell that is running, through the event channel's listener;
- after a cell that trained (its events hold steps, epochs, phases or guard observations),
  the event rules run over that cell's events (the kernel's and the supervisor's memory
  samples), so findings that need a stretch of the run (an input-bound epoch, a memory spike
  at evaluation) appear under the cell. A quick cell costs only a stat of the events file.

Each finding is shown once per kernel; info-level findings stay in the run folder.
`%trainmedic last` reads the previous run folder (the latest beside this kernel's own, or
./runs, or $TRAINMEDIC_RUNS_DIR) and shows how that kernel ended and why.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainmedic import runfolder
from trainmedic.events import (
    CellStart,
    Epoch,
    Event,
    FindingRaised,
    GuardObservation,
    PhaseStart,
    Step,
    TrainingPlan,
    decode,
)
from trainmedic.findings import Finding, Severity
from trainmedic.instrument import channel
from trainmedic.notebook import _display as display
from trainmedic.record import cell_label

USAGE = "usage: %trainmedic last (why the previous kernel ended) | %trainmedic (this kernel's run folder)"


def _trains(event: Event) -> bool:
    """Events that make a cell worth running the rules over."""
    if isinstance(event, PhaseStart):
        return event.phase != "idle"
    return isinstance(event, (Step, Epoch, GuardObservation, TrainingPlan, FindingRaised))


class InlineFindings:
    """The extension's state in one kernel: what was shown, where the cell's events begin."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.shown: set[tuple[str, str]] = set()
        self.pending: list[Finding] = []
        self.where = ""
        self._offset = 0
        self._in_cell = False

    def register(self) -> None:
        channel.add_listener(self.on_event)
        self.shell.events.register("pre_run_cell", self.pre_run_cell)
        self.shell.events.register("post_run_cell", self.post_run_cell)
        self.shell.register_magic_function(self.magic, "line", "trainmedic")

    def unregister(self) -> None:
        channel.remove_listener(self.on_event)
        for name, callback in (("pre_run_cell", self.pre_run_cell), ("post_run_cell", self.post_run_cell)):
            with contextlib.suppress(ValueError):  # not registered
                self.shell.events.unregister(name, callback)

    # -- as they happen --------------------------------------------------------------------
    def on_event(self, event: Event) -> None:
        if isinstance(event, CellStart):
            self.where = cell_label(event)
        elif isinstance(event, FindingRaised):
            finding = Finding.from_dict(event.finding)
            if self._in_cell and threading.current_thread() is threading.main_thread():
                self.show([finding])  # in the running cell, at the step it happened
            else:
                self.pending.append(finding)

    def pre_run_cell(self, info: Any) -> None:
        self._in_cell = True
        self._offset = _size(channel.events_path())

    def post_run_cell(self, result: Any) -> None:
        self._settle_guards()
        self._in_cell = False
        found, self.pending = self.pending, []
        found += self._cell_findings()
        self.show(found)

    def show(self, findings: Sequence[Finding]) -> None:
        fresh = []
        for f in findings:
            key = (f.code, f.message)
            if f.severity.at_least(Severity.WARNING) and key not in self.shown:
                self.shown.add(key)
                fresh.append(f)
        if fresh:
            _display(display.bundle(fresh, self.where))

    # -- after a cell --------------------------------------------------------------------
    @staticmethod
    def _settle_guards() -> None:
        """The PyTorch guard checks losses every few steps: a cell's last steps are checked now,
        not at the next cell's training (or never, when the kernel is shut down)."""
        if "torch" not in sys.modules:
            return
        from trainmedic.torch import _patches

        monitor = _patches.active()
        if monitor is not None:
            monitor.settle()

    def _cell_findings(self) -> list[Finding]:
        events = _read_from(channel.events_path(), self._offset)
        if not any(_trains(e) for e in events):
            return []
        from trainmedic.record import RunRecord
        from trainmedic.registry import run_rules

        return run_rules(RunRecord.of(events))

    # -- %trainmedic -------------------------------------------------------------------------
    def magic(self, line: str) -> None:
        words = line.split()
        if words == ["last"]:
            _display(last_run_bundle())
        elif not words:
            here = os.environ.get(runfolder.RUN_DIR_ENV)
            text = f"run folder of this kernel: {here}" if here else "this kernel is not supervised"
            _display(display.bundle([], header=("trainmedic", [text, USAGE])))
        else:
            print(USAGE, file=sys.stderr)


def _display(bundle: dict[str, str]) -> None:
    from IPython.display import display as ipython_display

    ipython_display(bundle, raw=True)  # type: ignore[no-untyped-call]


def _size(path: str | None) -> int:
    try:
        return os.stat(path).st_size if path else 0  # noqa: PTH116  # every cell: no Path objects
    except OSError:
        return 0


def _read_from(path: str | None, offset: int) -> list[Event]:
    """The complete event lines appended since `offset` (a line being written is left out)."""
    if not path or _size(path) <= offset:
        return []
    with open(path, "rb") as f:  # noqa: PTH123
        f.seek(offset)
        data = f.read()
    events = []
    for raw in data.split(b"\n")[:-1]:
        try:
            events.append(decode(raw.decode("utf-8", errors="replace")))
        except ValueError:
            continue
    return events


# -- the previous kernel ---------------------------------------------------------------------
def runs_base() -> Path:
    """Where this kernel's runs go: beside its own run folder, else $TRAINMEDIC_RUNS_DIR or ./runs."""
    here = os.environ.get(runfolder.RUN_DIR_ENV)
    if here:
        return Path(here).parent
    return runfolder.runs_base()


def previous_run(base: Path, current: Path | None) -> Path | None:
    """The latest run folder under `base` other than `current`, by the time its manifest was last
    written; one that ended wins over one still running (another notebook's kernel, say)."""
    own = current.resolve() if current is not None else None
    candidates = [d for d in runfolder.run_folders(base) if own is None or d.resolve() != own]

    def key(folder: Path) -> tuple[bool, float, str]:
        manifest = runfolder.read_json(folder / runfolder.MANIFEST) or {}
        ended = manifest.get("end") is not None
        return ended, (folder / runfolder.MANIFEST).stat().st_mtime, folder.name

    return max(candidates, key=key) if candidates else None


def last_run_bundle() -> dict[str, str]:
    """How the previous kernel ended, and its findings (its findings.json, else the rules run now)."""
    here = os.environ.get(runfolder.RUN_DIR_ENV)
    base = runs_base()
    run = previous_run(base, Path(here) if here else None)
    if run is None:
        return display.bundle([], header=("trainmedic: no previous run", [f"no run folder in {base}"]))
    manifest = runfolder.read_json(run / runfolder.MANIFEST) or {}
    stored = runfolder.read_json(run / runfolder.FINDINGS)
    if stored is not None:
        findings = [Finding.from_dict(f) for f in stored.get("findings", [])]
        source = runfolder.FINDINGS
    else:
        from trainmedic.verdict import diagnose_run_dir

        findings = diagnose_run_dir(run)[1]
        source = "diagnosed now: the supervisor left no findings.json"
    status = manifest.get("exit_code")
    ended = f"exit status {status}" if status is not None else "did not end under supervision"
    lines = [f"run folder {run}", f"{ended}; ended {manifest.get('end') or '?'} ({source})"]
    if not findings:
        lines.append("no findings")
    report = run / runfolder.REPORT
    if report.is_file():
        lines.append(f"report: {report}")
    return display.bundle(findings, header=("trainmedic: the previous kernel", lines))


_inline: InlineFindings | None = None


def load(shell: Any) -> None:
    """`%load_ext trainmedic` (idempotent)."""
    global _inline
    if _inline is not None and _inline.shell is shell:
        return
    if _inline is not None:
        _inline.unregister()
    _inline = InlineFindings(shell)
    _inline.register()
    if not channel.is_supervised():
        print(
            "trainmedic: this kernel is not supervised, so findings are only those of explicit guards; "
            "start it from a trainmedic kernel (`trainmedic kernel install`) for cells, memory and "
            "how it ends",
            file=sys.stderr,
        )


def unload(shell: Any) -> None:
    global _inline
    if _inline is not None:
        _inline.unregister()
        _inline = None
