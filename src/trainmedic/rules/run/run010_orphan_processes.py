"""RUN010 `orphan-processes`: processes of the trainer tree outlived the trainer.

Collector: the supervisor (`trainmedic run`) watches the trainer tree after the trainer ends,
ends what is left (SIGTERM, then SIGKILL) and sends an `OrphanEnded` for each process with its
command line, RSS and the signal that ended it. Ray's and Spark's own processes, which end a
moment after their driver, are theirs, not a leak of the user's (`evidence.ray`, `evidence.spark`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event, OrphanEnded, RunEnd, RunStart
from trainmedic.evidence import ray as _ray
from trainmedic.evidence import spark as _spark
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.units import human_bytes, signal_name


def _example() -> list[Event]:
    """The trainer (PID 101) ended by os._exit; its DataLoader worker PID 102 kept 3 GB."""
    return [
        RunStart(t=0.0, pid=100, command=["python", "train.py"]),
        RunEnd(t=10.0, pid=100, exit_code=0),
        OrphanEnded(
            t=10.5,
            pid=102,
            ppid=101,
            cmdline=["python", "train.py"],
            rss_bytes=3_000_000_000,
            signal=15,
        ),
    ]


SPEC = FindingSpec(
    code="RUN010",
    slug="orphan-processes",
    severity=Severity.WARNING,
    title="Processes outlived the trainer",
    what=(
        "Processes of the trainer tree (e.g. data-loader workers) outlived the trainer; "
        "trainmedic ended them and lists them."
    ),
    why="Orphans keep memory, GPU contexts and ports busy and can block the next run.",
    example="The trainer died by os._exit; its 4 DataLoader workers kept 3 GB each.",
    fix="Shut workers down on exit (context managers, persistent_workers=False at teardown).",
    decided_in=("run events",),
    example_input=_example,
)


# -- the decision ---------------------------------------------------------------------------
def orphan_processes(record: RunRecord) -> list[Finding]:
    """The orphans the supervisor ended, but Ray's and Spark's own processes."""
    # Ray's own processes (a detached `ray::PlacementGroupCleaner`, idle workers) may outlive a
    # driver that died, and Spark's JVM and Python daemon end a moment after their driver:
    # trainmedic ends them too, but they are Ray's and Spark's, not the user's leak.
    orphans = [
        o
        for o in record.of_type(OrphanEnded)
        if not (_ray.is_ray_process(o.cmdline) or _spark.is_spark_process(o.cmdline))
    ]
    if not orphans:
        return []
    evidence = {
        "processes": [
            {
                "pid": o.pid,
                "ppid": o.ppid,
                "cmdline": o.cmdline,
                "rss_bytes": o.rss_bytes,
                "signal": signal_name(o.signal) if o.signal else None,
            }
            for o in orphans
        ]
    }
    return [SPEC.finding(message(evidence), evidence=evidence)]


RULES: tuple[Rule, ...] = (orphan_processes,)


# -- the wording ----------------------------------------------------------------------------
def message(evidence: Mapping[str, Any]) -> str:
    processes = evidence["processes"]
    total = sum(p["rss_bytes"] or 0 for p in processes)
    return (
        f"{len(processes)} process(es) of the trainer tree outlived the trainer "
        f"({human_bytes(total)} RSS); trainmedic ended them"
    )
