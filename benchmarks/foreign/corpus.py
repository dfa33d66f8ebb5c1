"""Load the corpus manifest, run each script under `trainmedic run`, and judge what it reported.

Every script runs as written (its healthy form must give no warning or error) and once
per bug of its manifest entry (that run must report the bug's codes). Every run must
record step events: a run the guard did not see is a failure, whatever it reported.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

TORCH_EXIT_ABORT = "terminate called without an active exception"

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BLOCKING = ("error", "warning")
LAUNCHERS = {
    "python": [sys.executable],
    "torchrun-2": [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"],
}


@dataclass(frozen=True)
class Run:
    """One script, healthy (`bug` None) or with one bug."""

    script: str
    path: Path
    launcher: str
    env: dict[str, str]
    fast: bool  # part of the CI subset
    bug: str | None = None
    expected: tuple[str, ...] = ()
    run_args: tuple[str, ...] = ()  # options of `trainmedic run` (bug runs only)
    exit: int = 0  # the exit status the run must end with

    @property
    def name(self) -> str:
        return f"{self.script} --bug {self.bug}" if self.bug else self.script


@dataclass
class Result:
    run: Run
    steps: int = 0
    findings: dict[str, dict] = field(default_factory=dict)  # code -> finding, at warning or above
    exit_code: int | None = None
    seconds: float = 0.0
    stderr: str = ""  # the supervisor's and the script's, to explain a failure

    @property
    def codes(self) -> list[str]:
        return sorted(self.findings)

    @property
    def detected(self) -> bool:
        return set(self.run.expected) <= set(self.codes)

    @property
    def false_warnings(self) -> list[str]:
        return [] if self.run.bug else self.codes

    @property
    def ok(self) -> bool:
        return (
            self.steps > 0 and self.exit_code == self.run.exit and self.detected and not self.false_warnings
        )


def load(manifest: Path = HERE / "manifest.toml") -> list[Run]:
    """Every run of the manifest: each script as written, then each of its bugs."""
    runs: list[Run] = []
    for script, entry in tomllib.loads(manifest.read_text()).items():
        fast = entry.get("fast", False)  # true: every run of the script; a list: those named
        base = Run(
            script=script,
            path=HERE / entry["path"],
            launcher=entry.get("launcher", "python"),
            env=dict(entry.get("env", {})),
            fast=fast is True or (isinstance(fast, list) and "healthy" in fast),
        )
        runs.append(base)
        exits = entry.get("exit", {})
        if unknown := set(exits) - set(entry.get("bugs", {})):
            raise ValueError(f"{manifest}: [{script}] exit names no bug of the script: {sorted(unknown)}")
        for bug, codes in entry.get("bugs", {}).items():
            chosen = fast is True or (isinstance(fast, list) and bug in fast)
            runs.append(
                Run(
                    **{
                        **base.__dict__,
                        "bug": bug,
                        "expected": tuple(codes),
                        "fast": chosen,
                        "run_args": tuple(entry.get("run_args", ())),
                        "exit": exits.get(bug, 0),
                    }
                )
            )
    return runs


def child_env(extra: dict[str, str]) -> dict[str, str]:
    """This checkout's trainmedic, one intra-op thread per process (runs go two at a time)."""
    env = dict(os.environ)
    paths = [str(REPO / "src"), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env.update(
        PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)),
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        CUDA_VISIBLE_DEVICES="",
        TF_CPP_MIN_LOG_LEVEL="3",
        **extra,
    )
    return env


def execute(run: Run, work: Path, timeout: float = 600) -> Result:
    out = work / run.name.replace(" ", "_")
    argv = [*LAUNCHERS[run.launcher], str(run.path), *(["--bug", run.bug] if run.bug else [])]
    command = [
        *[sys.executable, "-m", "trainmedic", "run", "--quiet", "--out", str(out)],
        *run.run_args,
        *["--", *argv],
    ]
    start = time.perf_counter()
    try:
        for attempt in range(2):
            shutil.rmtree(out, ignore_errors=True)
            proc = subprocess.run(
                command,
                cwd=work,
                env=child_env(run.env),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
            # PyTorch 2.13's gloo workers sometimes abort at exit after a finished job (also bare,
            # without trainmedic): such a run is run once more, as the tests do.
            if attempt or run.launcher == "python" or TORCH_EXIT_ABORT not in proc.stdout + proc.stderr:
                break
        exit_code: int | None = proc.returncode
        stderr = proc.stderr
    except subprocess.TimeoutExpired:
        exit_code, stderr = None, f"timed out after {timeout:.0f} s"  # never the expected status
    result = Result(run, exit_code=exit_code, seconds=time.perf_counter() - start, stderr=stderr)
    events = out / "events.jsonl"
    if events.exists():
        result.steps = sum('"kind":"step"' in line for line in events.read_text().splitlines())
    findings = out / "findings.json"
    if findings.exists():
        found = json.loads(findings.read_text())["findings"]
        result.findings = {f["code"]: f for f in found if f["severity"] in BLOCKING}
    return result


def run_all(runs: Iterable[Run], workers: int = 2) -> list[Result]:
    with tempfile.TemporaryDirectory(prefix="tm-foreign-") as tmp, ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda r: execute(r, Path(tmp)), list(runs)))


def table(results: list[Result], markdown: bool = False) -> str:
    """One row per run, aligned text (or a Markdown table), then the totals."""
    rows = [("script", "steps", "exit", "expected", "detected", "false warnings", "ok", "s")]
    for r in results:
        rows.append(
            (
                r.run.name,
                str(r.steps),
                str(r.exit_code),
                ", ".join(r.run.expected) or "-",
                ", ".join(r.codes) or "-",
                ", ".join(r.false_warnings) or "-",
                "yes" if r.ok else "NO",
                f"{r.seconds:.0f}",
            )
        )
    if markdown:
        lines = [f"| {' | '.join(row)} |" for row in rows]
        lines.insert(1, "|" + "---|" * len(rows[0]))
    else:
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    bugs = [r for r in results if r.run.bug]
    healthy = [r for r in results if not r.run.bug]
    lines.append(
        f"\n{sum(r.detected for r in bugs)}/{len(bugs)} bugs detected; "
        f"{sum(bool(r.false_warnings) for r in healthy)}/{len(healthy)} healthy scripts "
        "with a false warning; "
        f"{sum(r.steps > 0 for r in results)}/{len(results)} runs with step events"
    )
    return "\n".join(lines)
