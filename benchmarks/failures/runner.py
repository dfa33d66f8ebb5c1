"""Run the cases under trainmedic and score them: detected / missed / false positive.

Each case runs in its own folder under the output folder, as a real child
process with a timeout; cases run in parallel on a small thread pool (the work
is in the children). Prepare steps (data sets, real framework logs) run once,
before the cases that need them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .manifest import Case

REPO = Path(__file__).resolve().parents[2]
BLOCKING = ("error", "warning")


@dataclass
class Outcome:
    """What trainmedic reported on one case, and the verdict."""

    case: Case
    status: str  # detected | missed | clean | false-positive | error
    found: list[dict[str, object]] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    false_positives: list[str] = field(default_factory=list)
    seconds: float = 0.0
    exit_code: int | None = None
    detail: str = ""
    work: Path | None = None

    def codes(self) -> list[str]:
        return sorted({str(f["code"]) for f in self.found})

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.case.id,
            "category": self.case.category,
            "control": self.case.control,
            "status": self.status,
            "must": list(self.case.must),
            "found": [
                {k: f[k] for k in ("code", "slug", "severity", "message") if k in f} for f in self.found
            ],
            "missed": self.missed,
            "false_positives": self.false_positives,
            "seconds": round(self.seconds, 1),
            "exit_code": self.exit_code,
            "detail": self.detail,
        }


def child_env(extra: Mapping[str, str] = {}) -> dict[str, str]:
    """The environment of every child: this checkout's trainmedic first, quiet frameworks, no GPU."""
    env = dict(os.environ)
    src = str(REPO / "src")
    paths = [src, str(REPO), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != src]]
    env.update(
        PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)),
        TF_CPP_MIN_LOG_LEVEL="3",
        CUDA_VISIBLE_DEVICES="",
        TOKENIZERS_PARALLELISM="false",
        PYTHONWARNINGS="ignore",
        # one intra-op thread per process: 2 cases at a time must not oversubscribe a 2-core machine
        # (timing-based findings such as TRN005 compare compute with data wait)
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        **extra,
    )
    return env


def substitute(items: Iterable[str], values: Mapping[str, str]) -> list[str]:
    out = []
    for item in items:
        text = item
        for key, value in values.items():
            text = text.replace("{" + key + "}", value)
        out.append(text)
    return out


class Prepared:
    """Prepare steps run on first need, once each (a lock per step): cases without one start at once."""

    def __init__(self, steps: Mapping[str, tuple[str, ...]], out: Path) -> None:
        self.steps, self.out = steps, out
        self.locks = {name: threading.Lock() for name in steps}

    def folder(self, name: str) -> Path:
        folder = self.out / "prepared" / name
        with self.locks[name]:
            if not (folder / ".done").exists():
                folder.mkdir(parents=True, exist_ok=True)
                command = substitute(self.steps[name], {"python": sys.executable, "prepared": str(folder)})
                done = subprocess.run(
                    command,
                    cwd=REPO,
                    env=child_env(),
                    check=False,
                    capture_output=True,
                    text=True,
                    timeout=1800,
                )
                if done.returncode != 0:
                    raise RuntimeError(
                        f"prepare step {name} failed ({done.returncode}): {done.stderr[-2000:]}"
                    )
                (folder / ".done").touch()
        return folder


def trainmedic_command(case: Case, work: Path, prepared: Path | None) -> list[str]:
    values = {"python": sys.executable, "work": str(work), "prepared": str(prepared or "")}
    base = [sys.executable, "-m", "trainmedic"]
    if case.kind == "run":
        run_args = substitute(case.run_args, values)
        return [
            *base,
            "run",
            "--quiet",
            "--out",
            str(work / "run"),
            *run_args,
            "--",
            *substitute(case.command, values),
        ]
    return [*base, *substitute(case.args, values), "--format", "json"]


def read_findings(case: Case, work: Path, stdout: str) -> list[dict[str, object]]:
    if case.kind == "run":
        path = work / "run" / "findings.json"
        document = json.loads(path.read_text())
    else:
        document = json.loads(stdout)
    findings: list[dict[str, object]] = document["findings"]
    return findings


def score(case: Case, found: list[dict[str, object]]) -> tuple[str, list[str], list[str]]:
    codes = {str(f["code"]) for f in found}
    if case.control:
        noisy = sorted({str(f["code"]) for f in found if f.get("severity") in BLOCKING})
        return ("false-positive" if noisy else "clean"), [], noisy
    missed = [code for code in case.must if code not in codes]
    false_positives = sorted(codes & set(case.must_not))
    return ("missed" if missed else "detected"), missed, false_positives


def reused(case: Case, work: Path) -> Outcome | None:
    """The outcome of an earlier run of this case in this output folder (`--reuse`), re-scored."""
    try:
        saved = json.loads((work / "outcome.json").read_text()) if (work / "outcome.json").exists() else {}
        found = read_findings(case, work, (work / "stdout.txt").read_text())
    except (OSError, ValueError, KeyError):
        return None
    if saved.get("status") == "error":
        return None
    status, missed, false_positives = score(case, found)
    seconds, exit_code = saved.get("seconds", 0.0), saved.get("exit_code")
    return Outcome(case, status, found, missed, false_positives, seconds, exit_code, work=work)


def run_case(case: Case, out: Path, prepared: Path | None, reuse: bool = False) -> Outcome:
    work = out / "cases" / case.id
    if reuse and (earlier := reused(case, work)) is not None:
        return earlier
    outcome = _run_case(case, work, prepared)
    (work / "outcome.json").write_text(json.dumps(outcome.to_json()))
    return outcome


def _run_case(case: Case, work: Path, prepared: Path | None) -> Outcome:
    if work.exists():
        subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    command = trainmedic_command(case, work, prepared)
    (work / "command.json").write_text(json.dumps(command))
    start = time.monotonic()
    try:
        done = subprocess.run(
            command,
            cwd=REPO,
            env=child_env(case.env),
            check=False,
            capture_output=True,
            text=True,
            timeout=case.timeout,
        )
    except subprocess.TimeoutExpired:
        return Outcome(
            case,
            "error",
            seconds=time.monotonic() - start,
            detail=f"timed out after {case.timeout:.0f} s",
            work=work,
        )
    seconds = time.monotonic() - start
    (work / "stdout.txt").write_text(done.stdout)
    (work / "stderr.txt").write_text(done.stderr)
    try:
        found = read_findings(case, work, done.stdout)
    except (OSError, ValueError, KeyError) as error:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        return Outcome(
            case, "error", seconds=seconds, exit_code=done.returncode, detail=f"{error}; {tail[0]}", work=work
        )
    status, missed, false_positives = score(case, found)
    return Outcome(case, status, found, missed, false_positives, seconds, done.returncode, work=work)


def run_cases(
    cases: list[Case],
    prepares: Mapping[str, tuple[str, ...]],
    out: Path,
    workers: int = 2,
    progress: bool = True,
    reuse: bool = False,
) -> list[Outcome]:
    prepared = Prepared(prepares, out)

    def one(case: Case) -> Outcome:
        outcome = run_case(case, out, prepared.folder(case.prepare) if case.prepare else None, reuse)
        if progress:
            print(
                f"  {outcome.status:<15} {case.id} ({outcome.seconds:.0f} s) {outcome.detail}",
                file=sys.stderr,
                flush=True,
            )
        return outcome

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, cases))
