"""`trainmedic verify-resume -- CMD`: prove that a run killed at any instant resumes exactly.

"Test resume" is rarely done because it is tedious; this does it. The command is
run three ways, each writing checkpoints to its own folder (TRAINMEDIC_CHECKPOINT_DIR,
honoured by `trainmedic.train.fit`): once uninterrupted; once killed with SIGKILL at a
random point (or, with `--kill-at write`, in the middle of a checkpoint write); then
again, so it resumes. The final checkpoints must hold the same weights, bit for bit.
On failure the first differing tensor is named. With `--kill-at write` the trainer
kills itself (SIGKILL) halfway through its second checkpoint payload: trainmedic's
checkpoint writer honours TRAINMEDIC_KILL_IN_WRITE for exactly this.

The final, resuming run is instrumented as under `trainmedic run`: when the script's own resume
code restores the weights and not the rest of the state (TOR017 `resume-state-lost`), the
finding, with what was lost, is reported beside the verdict.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click

from trainmedic.cli.options import plain_format_option
from trainmedic.errors import UsageError
from trainmedic.eventlog.reader import read_events
from trainmedic.instrument.channel import child_env
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules

POLL_S = 0.0005
RESUME_CODE = "TOR017"  # resume-state-lost: the parts of the state a resume did not restore
# = trainmedic.train.checkpoint.KILL_IN_WRITE_ENV (not imported: that module imports torch)
KILL_IN_WRITE_ENV = "TRAINMEDIC_KILL_IN_WRITE"


@dataclass(slots=True)
class Verdict:
    """Whether the resumed run matched the uninterrupted one, and where it first differed."""

    passed: bool
    reason: str
    kills: list[dict[str, Any]] = field(default_factory=list)
    reference_step: int | None = None
    resumed_step: int | None = None
    first_difference: str | None = None
    max_abs_difference: float | None = None
    tensors_compared: int = 0
    workdir: str = ""
    findings: list[dict[str, Any]] = field(default_factory=list)  # TOR017 of the resuming run


def _env(directory: Path, steps: int | None, *, kill_in_write: int | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TRAINMEDIC_RESUME_FROM", KILL_IN_WRITE_ENV)}
    if kill_in_write is not None:
        env[KILL_IN_WRITE_ENV] = str(kill_in_write)
    env["TRAINMEDIC_CHECKPOINT_DIR"] = str(directory)
    if steps is not None:
        env["TRAINMEDIC_MAX_STEPS"] = str(steps)
    return env


def _run(
    argv: list[str], directory: Path, steps: int | None, timeout: float, events: Path | None = None
) -> tuple[int, float]:
    """Run CMD to the end; returns its exit status and the time between its first and last checkpoints.

    With `events`, CMD runs instrumented (the boot module, as under `trainmedic run`) and its
    events go to that file.
    """
    env = _env(directory, steps)
    if events is not None:
        env = child_env(events, env)
    try:
        proc = subprocess.Popen(argv, env=env, start_new_session=True)
    except FileNotFoundError as exc:
        raise UsageError(f"CMD: cannot run {argv[0]!r}: {exc.strerror}") from exc
    started = time.monotonic()
    first: float | None = None
    last: float | None = None
    newest = 0.0
    while proc.poll() is None:
        now = time.monotonic()
        if now - started > timeout:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return 124, 0.0
        if _newest_checkpoint(directory) > newest:
            newest = _newest_checkpoint(directory)
            first, last = first or now, now
        time.sleep(POLL_S * 20)
    return proc.returncode, (last - first) if first is not None and last is not None else 0.0


def _newest_checkpoint(directory: Path) -> float:
    """The write time of the newest manifest (0 when there is none).

    The trainer rotates old checkpoints out while this looks (in the background, with
    background saves): a manifest listed a moment ago may be gone.
    """
    if not directory.is_dir():
        return 0.0
    newest = 0.0
    for manifest in directory.glob("*.json"):
        with contextlib.suppress(FileNotFoundError):
            newest = max(newest, manifest.stat().st_mtime)
    return newest


def _newest_step(directory: Path) -> int:
    """The highest step among the manifests in `directory` (-1 when none is readable)."""
    steps = [-1]
    for manifest in directory.glob("*.json") if directory.is_dir() else []:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            steps.append(int(json.loads(manifest.read_text())["step"]))
    return max(steps)


def _writing(directory: Path) -> bool:
    return directory.is_dir() and any(directory.glob(".*.tmp"))


def _kill_once(
    argv: list[str], directory: Path, steps: int | None, *, mode: str, span: float, rng: random.Random
) -> dict[str, Any]:
    """Start CMD, wait for it to write a checkpoint, then SIGKILL its process group.

    `span` is the time between the uninterrupted run's first and last checkpoints: a random
    kill lands within that span after this run's first new checkpoint.
    """
    before = _newest_checkpoint(directory)
    # write mode: the trainer kills itself halfway through its second checkpoint payload
    kill_in_write = 2 if mode == "write" else None
    proc = subprocess.Popen(
        argv, env=_env(directory, steps, kill_in_write=kill_in_write), start_new_session=True
    )
    started = time.monotonic()
    while proc.poll() is None and _newest_checkpoint(directory) <= before:
        time.sleep(POLL_S * 20)
    when = time.monotonic() + rng.uniform(0.0, span)
    while proc.poll() is None:
        now = time.monotonic()
        if mode == "random" and now >= when:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return {"killed": True, "after_s": round(now - started, 3), "during_write": _writing(directory)}
        time.sleep(POLL_S)
    after = round(time.monotonic() - started, 3)
    if proc.returncode == -signal.SIGKILL:  # it killed itself in a checkpoint write
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # and its workers, if any
        return {"killed": True, "after_s": after, "during_write": _writing(directory)}
    return {"killed": False, "after_s": after, "exit_code": proc.returncode}


def verify_resume(
    argv: list[str], *, kills: int, mode: str, steps: int | None, seed: int, timeout: float, workdir: Path
) -> Verdict:
    reference, interrupted = workdir / "reference", workdir / "interrupted"
    code, span = _run(argv, reference, steps, timeout)
    if code != 0:
        return Verdict(False, f"the uninterrupted run failed (exit status {code})", workdir=str(workdir))
    rng = random.Random(seed)
    verdict = Verdict(False, "", workdir=str(workdir))
    final_step = _newest_step(reference)
    for _ in range(kills):
        kill = _kill_once(argv, interrupted, steps, mode=mode, span=span, rng=rng)
        kill["too_late"] = kill["killed"] and _newest_step(interrupted) >= final_step
        verdict.kills.append(kill)
    if not any(kill["killed"] and not kill["too_late"] for kill in verdict.kills):
        verdict.reason = "inconclusive: no kill landed before the last checkpoint (make the run longer)"
        return verdict
    events = workdir / "resumed-events.jsonl"
    code, _ = _run(argv, interrupted, steps, timeout, events)
    verdict.findings = _resume_findings(events)
    if code != 0:
        verdict.reason = f"the resumed run failed (exit status {code})"
        return verdict
    return _compare(reference, interrupted, verdict)


def _resume_findings(events: Path) -> list[dict[str, Any]]:
    """TOR017 among the findings of the resuming run's events (none when it wrote none)."""
    if not events.is_file():
        return []
    record = RunRecord.of(read_events(events).events)
    return [f.to_dict() for f in run_rules(record) if f.code == RESUME_CODE]


def _compare(reference: Path, interrupted: Path, verdict: Verdict) -> Verdict:
    import torch
    from trainmedic.checkpoint import load_latest

    ref, got = load_latest(reference), load_latest(interrupted)
    if ref is None or got is None:
        missing = reference if ref is None else interrupted
        verdict.reason = (
            f"no checkpoint in {missing}: does CMD call trainmedic.train.fit with a checkpoint_dir?"
        )
        return verdict
    verdict.reference_step, verdict.resumed_step = ref.info.step, got.info.step
    if ref.info.step != got.info.step:
        verdict.reason = f"the runs ended at different steps ({ref.info.step} vs {got.info.step})"
        return verdict
    a, b = ref.state["model"], got.state["model"]
    if a.keys() != b.keys():
        verdict.reason = f"the models differ in their tensors: {sorted(set(a) ^ set(b))[:5]}"
        return verdict
    for name in a:
        verdict.tensors_compared += 1
        x, y = a[name], b[name]
        if x.shape != y.shape or x.dtype != y.dtype or not torch.equal(x, y):
            verdict.first_difference = name
            if x.shape == y.shape and x.is_floating_point():
                verdict.max_abs_difference = float((x.double() - y.double()).abs().max())
            verdict.reason = f"the weights differ after resume, first in {name!r}"
            return verdict
    verdict.passed = True
    verdict.reason = (
        f"resumed weights equal the uninterrupted run's bit for bit ({verdict.tensors_compared} tensors)"
    )
    return verdict


@click.command("verify-resume", context_settings={"ignore_unknown_options": True})
@click.option(
    "--kills",
    default=1,
    show_default=True,
    type=click.IntRange(1, 100),
    help="Kills before the final resume.",
)
@click.option(
    "--kill-at",
    "mode",
    type=click.Choice(["random", "write"]),
    default="random",
    show_default=True,
    help="Kill at a random instant, or in the middle of a checkpoint write.",
)
@click.option(
    "--steps", type=click.IntRange(1), default=None, help="Cap the run at this many optimizer steps."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the kill points.")
@click.option("--timeout", type=float, default=3600, show_default=True, help="Seconds allowed per run.")
@click.option("--keep", is_flag=True, help="Keep the checkpoint folders (printed) instead of removing them.")
@plain_format_option
@click.argument("cmd", nargs=-1, required=True, type=click.UNPROCESSED)
def command(  # noqa: PLR0917 (click passes options by position)
    kills: int,
    mode: str,
    steps: int | None,
    seed: int,
    timeout: float,
    keep: bool,
    fmt: str,
    cmd: tuple[str, ...],
) -> int:
    """Run CMD uninterrupted, then killed and resumed; check the final weights are identical."""
    argv = [sys.executable if cmd[0] == "python" else cmd[0], *cmd[1:]]
    workdir = Path(tempfile.mkdtemp(prefix="trainmedic-verify-resume-"))
    try:
        verdict = verify_resume(
            argv, kills=kills, mode=mode, steps=steps, seed=seed, timeout=timeout, workdir=workdir
        )
    finally:
        if not keep:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)
    if fmt == "json":
        sys.stdout.write(json.dumps(asdict(verdict), indent=2) + "\n")
    else:
        status = "PASS" if verdict.passed else "FAIL"
        if verdict.reason.startswith("inconclusive"):
            status, verdict.reason = "INCONCLUSIVE", verdict.reason.removeprefix("inconclusive: ")
        sys.stdout.write(f"verify-resume: {status}: {verdict.reason}\n")
        for number, kill in enumerate(verdict.kills, start=1):
            where = "during a checkpoint write" if kill.get("during_write") else "between checkpoints"
            if kill.get("too_late"):
                where = "after the last checkpoint (tests nothing)"
            text = (
                f"killed after {kill['after_s']} s, {where}" if kill["killed"] else "finished before the kill"
            )
            sys.stdout.write(f"  kill {number}: {text}\n")
        if verdict.max_abs_difference is not None:
            sys.stdout.write(
                f"  max |difference| in {verdict.first_difference}: {verdict.max_abs_difference:.3g}\n"
            )
        for finding in verdict.findings:
            sys.stdout.write(f"  {finding['code']} {finding['slug']}: {finding['message']}\n")
            if finding.get("fix"):
                sys.stdout.write(f"    fix: {finding['fix']}\n")
        if keep:
            sys.stdout.write(f"  checkpoints kept in {workdir}\n")
    return 0 if verdict.passed else 1
