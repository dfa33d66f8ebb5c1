"""Stand-in for `trainmedic run` until the supervisor is merged (delete this file then).

Each folder comes from a real process (tests/report/trainer.py) run with the
boot module active, its RSS sampled with psutil while it runs, its output
captured, and, for the OOM run, a real cgroup v1 memory limit that the kernel
enforces with a real OOM kill. It follows the run-folder contract of
DESIGN.md: events.jsonl, output.log, findings.json, manifest.json.

Findings come from the rules (`run_rules`) plus, while the rule families are
still being written, the two facts these runs measure directly: an OOM kill
seen in the cgroup's `oom_control`, and the first non-finite loss.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import psutil

from trainmedic.events import (
    EventWriter,
    MemorySample,
    ProcessExit,
    ProcessSpawn,
    RunEnd,
    RunStart,
    Step,
    read_events,
)
from trainmedic.findings import Finding, findings_to_json
from trainmedic.instrument.environment import child_env
from trainmedic.record import RunRecord
from trainmedic.registry import lookup, run_rules
from trainmedic.report.html import write_report

from .runs import TRAINER

SAMPLE_EVERY_S = 0.05


def memory_cgroup_root() -> Path | None:
    """This process's cgroup v1 memory directory, if writable (we are root in CI)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, rel = line.split(":", 2)
        if "memory" in controllers.split(","):
            path = Path("/sys/fs/cgroup/memory") / rel.lstrip("/")
            return path if os.access(path / "cgroup.procs", os.W_OK) else None
    return None


def _rss_tree(proc: psutil.Process) -> dict[str, int]:
    found: dict[str, int] = {}
    with contextlib.suppress(psutil.Error):
        for p in [proc, *proc.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                found[str(p.pid)] = p.memory_info().rss
    return found


def make_run(run_dir: Path, mode: str, *, memory_limit: int | None = None) -> Path:
    """Run the trainer in `mode` and leave a complete run folder (with report.html) in run_dir."""
    run_dir.mkdir(parents=True, exist_ok=True)
    events_path = run_dir / "events.jsonl"
    argv = [sys.executable, str(TRAINER), mode]
    cgroup = None
    if memory_limit is not None:
        root = memory_cgroup_root()
        assert root is not None, "the OOM run needs a writable cgroup v1 memory controller (root)"
        cgroup = root / f"trainmedic-report-test-{uuid.uuid4().hex[:8]}"
        cgroup.mkdir()
        (cgroup / "memory.limit_in_bytes").write_text(str(memory_limit))
    writer = EventWriter(events_path)
    started = time.time()
    writer.emit(RunStart(command=argv, cwd=os.getcwd(), name=f"trainer-{mode}"))

    def enter_cgroup() -> None:  # in the child, before exec: the limit covers the trainer from its start
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))

    try:
        with (run_dir / "output.log").open("wb") as log:
            proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=child_env(events_path),
                preexec_fn=enter_cgroup,  # noqa: PLW1509 - one write, before exec
            )
            writer.emit(ProcessSpawn(pid=proc.pid, ppid=os.getpid(), cmdline=argv, role="trainer"))
            watched = psutil.Process(proc.pid)
            while proc.poll() is None:
                rss = _rss_tree(watched)
                if rss:
                    usage = int((cgroup / "memory.usage_in_bytes").read_text()) if cgroup else None
                    writer.emit(
                        MemorySample(
                            rss_bytes=sum(rss.values()),
                            processes=rss,
                            cgroup_bytes=usage,
                            limit_bytes=memory_limit,
                        )
                    )
                time.sleep(SAMPLE_EVERY_S)
            status = proc.wait(timeout=120)
        oom_kills = _oom_kills(cgroup)
    finally:
        if cgroup is not None:
            with contextlib.suppress(OSError):
                cgroup.rmdir()
    sig = -status if status < 0 else None
    writer.emit(ProcessExit(pid=proc.pid, exit_code=None if sig else status, signal=sig))
    writer.emit(RunEnd(exit_code=128 + sig if sig else status, signal=sig, duration_s=time.time() - started))
    writer.close()
    record = RunRecord.of(read_events(events_path).events)
    findings = run_rules(record) + _measured_findings(record, oom_kills, memory_limit)
    (run_dir / "findings.json").write_text(findings_to_json(_dedupe(findings)))
    (run_dir / "manifest.json").write_text(json.dumps(_manifest(), indent=2))
    return write_report(run_dir)


def _oom_kills(cgroup: Path | None) -> int:
    if cgroup is None:
        return 0
    for line in (cgroup / "memory.oom_control").read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            return int(value)
    return 0


def _measured_findings(record: RunRecord, oom_kills: int, limit: int | None) -> list[Finding]:
    found: list[Finding] = []
    end = record.end
    if oom_kills and end is not None and end.signal == 9:
        phase = record.phase_at(end.t - 0.01) or "unknown"
        found.append(
            lookup("RUN001").finding(
                f"Killed by the OOM killer at {record.peak_rss / 2**20:.0f} MiB during {phase}",
                evidence={
                    "peak_rss_bytes": record.peak_rss,
                    "limit_bytes": limit,
                    "phase": phase,
                    "oom_kill": oom_kills,
                },
                epoch=next(
                    (
                        s.epoch + 1
                        for s in reversed(record.phase_spans)
                        if s.end is None and s.epoch is not None
                    ),
                    None,
                ),
            )
        )
    bad = next((s for s in record.of_type(Step) if not math.isfinite(s.metrics.get("loss", 0.0))), None)
    if bad is not None:
        before = [s.metrics["loss"] for s in record.of_type(Step) if s.step < bad.step]
        found.append(
            lookup("TRN001").finding(
                f"Loss became {bad.metrics['loss']} at step {bad.step} (epoch {(bad.epoch or 0) + 1})",
                evidence={
                    "first_step": bad.step,
                    "value": str(bad.metrics["loss"]),
                    "last_finite": before[-1] if before else None,
                },
                step=bad.step,
                epoch=None if bad.epoch is None else bad.epoch + 1,  # findings count epochs from 1
            )
        )
    return found


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: dict[str, Finding] = {}
    for f in findings:
        seen.setdefault(f.code, f)
    return list(seen.values())


def _manifest() -> dict[str, object]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "memory_total_bytes": psutil.virtual_memory().total,
        "packages": {"numpy": np.__version__, "psutil": psutil.__version__},
        "argv": sys.argv[:1],
    }
