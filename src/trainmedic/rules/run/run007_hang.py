"""RUN007 `hang`: no progress and near-zero CPU in the trainer tree for the hang timeout.

Collector: the supervisor (`trainmedic run`, `supervise/memory.py`) decides "hung" (no
output, no events, tree CPU under the threshold for `--hang-timeout`), takes every trainer
thread's Python stack with py-spy from outside the process, and sends one `HangDetected`
with the stacks, the idle time, the CPU it saw and what it did (`--on-hang`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainmedic.events import CellStart, Event, HangDetected, RunStart
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord, cell_label, cell_running


def _example() -> list[Event]:
    """No output and 0 % CPU for 10 minutes; py-spy finds the main thread waiting on a lock."""
    dump = (
        "Process 101: python train.py\n"
        'Thread 101 (idle): "MainThread"\n'
        "    acquire (threading.py:320)\n"
        "    train_step (train.py:23)\n"
    )
    return [
        RunStart(t=0.0, pid=100, command=["python", "train.py"]),
        HangDetected(t=600.0, pid=100, idle_s=600.0, cpu_percent=0.0, stacks={"101": dump}),
    ]


SPEC = FindingSpec(
    code="RUN007",
    slug="hang",
    severity=Severity.ERROR,
    title="Hang: no progress and no CPU",
    what=(
        "No progress output and near-zero CPU in the trainer tree for the hang timeout; the "
        "Python stack of every trainer thread is attached."
    ),
    why="A deadlocked run holds its GPUs for hours while producing nothing.",
    example="Two DataLoader workers waiting on a lock the main process holds; a collective never joined.",
    fix=(
        "Read the stacks (taken with py-spy, from outside the process): the frame each thread "
        "waits in names the lock, queue or collective; `--on-hang stop` ends such runs instead "
        "of holding the machine."
    ),
    decided_in=("run events",),
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class Stall:
    """One hang the supervisor detected: where each thread waits, and the notebook cell running."""

    event: HangDetected
    waiting_in: dict[str, list[str]]  # pid -> 'thread: function (file:line)' of each thread's top frame
    cell: CellStart | None

    def evidence(self) -> dict[str, object]:
        cell, event = self.cell, self.event
        return {
            "cell": {"execution_count": cell.execution_count, "first_line": cell.first_line}
            if cell
            else None,
            "idle_s": event.idle_s,
            "cpu_percent": event.cpu_percent,
            "action": event.action,
            "waiting_in": self.waiting_in,
            "stacks": event.stacks,
        }


# -- the decision ---------------------------------------------------------------------------
def hang(record: RunRecord) -> list[Finding]:
    """Each hang the supervisor detected; a repeat that says the same is dropped."""
    found = []
    for event in record.of_type(HangDetected):
        tops = {pid: innermost_frames(text) for pid, text in event.stacks.items()}
        stall = Stall(event, tops, cell_running(record.events, until=event.t))
        found.append(SPEC.finding(message(stall), evidence=stall.evidence()))
    return found[:1] + [f for f in found[1:] if f.message != found[0].message]


_SPY_THREAD = re.compile(r'^Thread (?P<tid>\S+) \((?P<state>[^)]*)\): "(?P<name>[^"]*)"')
_SPY_FRAME = re.compile(r"^\s+(?P<func>\S.*?) \((?P<where>[^()]+:\d+)\)\s*$")


def innermost_frames(stack_text: str) -> list[str]:
    """'thread: function (file:line)' of the top frame of each thread in a py-spy dump."""
    tops: list[str] = []
    thread: str | None = None
    for line in stack_text.splitlines():
        head = _SPY_THREAD.match(line)
        if head:
            thread = head["name"]
            continue
        frame = _SPY_FRAME.match(line)
        if frame and thread is not None:
            tops.append(f"{thread}: {frame['func']} ({frame['where']})")
            thread = None
    return tops


RULES: tuple[Rule, ...] = (hang,)


# -- the wording ----------------------------------------------------------------------------
def message(stall: Stall) -> str:
    """'No progress and 0.0 % CPU for 600 s; threads wait in pid 101: MainThread: acquire (...)'."""
    event = stall.event
    waiting = "; ".join(f"pid {pid}: " + ", ".join(t) for pid, t in stall.waiting_in.items() if t)
    return (
        f"No progress and {event.cpu_percent:.1f} % CPU for {event.idle_s:.0f} s"
        + (f" in {cell_label(stall.cell)}" if stall.cell else "")
        + (f"; threads wait in {waiting}" if waiting else "")
    )
