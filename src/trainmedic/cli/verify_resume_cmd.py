"""`trainmedic verify-resume -- CMD`: prove that a run killed at any instant resumes exactly.

"Test resume" is rarely done because it is tedious; this does it. The command is
run three ways, each writing checkpoints to its own folder (TRAINMEDIC_CHECKPOINT_DIR,
honoured by `trainmedic.train.fit`): once uninterrupted; once killed with SIGKILL at a
random point (or, with `--kill-at write`, in the middle of a checkpoint write); then
again, so it resumes. The final checkpoints must hold the same weights, bit for bit.
On failure the first differing tensor is named.
"""

from __future__ import annotations

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

from trainmedic.cli.options import format_option
from trainmedic.errors import UsageError

POLL_S = 0.0005


@dataclass
class Verdict:
    passed: bool
    reason: str
    kills: list[dict[str, Any]] = field(default_factory=list)
    reference_step: int | None = None
    resumed_step: int | None = None
    first_difference: str | None = None
    max_abs_difference: float | None = None
    tensors_compared: int = 0
    workdir: str = ""


def _env(directory: Path, steps: int | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TRAINMEDIC_RESUME_FROM"}
    env["TRAINMEDIC_CHECKPOINT_DIR"] = str(directory)
    if steps is not None:
        env["TRAINMEDIC_MAX_STEPS"] = str(steps)
    return env


def _run(argv: list[str], directory: Path, steps: int | None, timeout: float) -> tuple[int, float]:
    started = time.monotonic()
    try:
        done = subprocess.run(argv, env=_env(directory, steps), timeout=timeout, check=False)
    except FileNotFoundError as exc:
        raise UsageError(f"CMD: cannot run {argv[0]!r}: {exc.strerror}") from exc
    return done.returncode, time.monotonic() - started


def _has_checkpoint(directory: Path) -> bool:
    return directory.is_dir() and any(directory.glob("*.json"))


def _writing(directory: Path) -> bool:
    return directory.is_dir() and any(directory.glob(".*.tmp"))


def _kill_once(
    argv: list[str], directory: Path, steps: int | None, *, mode: str, expected: float, rng: random.Random
) -> dict[str, Any]:
    """Start CMD, wait for its first checkpoint, then SIGKILL its process group at the chosen point.

    `expected` is how long the uninterrupted run took: a random kill lands before that.
    """
    proc = subprocess.Popen(argv, env=_env(directory, steps), start_new_session=True)
    started = time.monotonic()
    deadline = started + expected * 1.5 + 5  # a resumed run that hangs still gets killed
    while proc.poll() is None and not _has_checkpoint(directory) and time.monotonic() < deadline:
        time.sleep(POLL_S * 20)
    when = time.monotonic() + rng.uniform(0.0, max(started + expected - time.monotonic(), 0.0) * 0.9)
    while proc.poll() is None:
        now = time.monotonic()
        if (mode == "write" and _writing(directory)) or (mode == "random" and now >= when) or now >= deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return {"killed": True, "after_s": round(now - started, 3), "during_write": _writing(directory)}
        time.sleep(POLL_S)
    return {"killed": False, "after_s": round(time.monotonic() - started, 3), "exit_code": proc.returncode}


def verify_resume(
    argv: list[str], *, kills: int, mode: str, steps: int | None, seed: int, timeout: float, workdir: Path
) -> Verdict:
    reference, interrupted = workdir / "reference", workdir / "interrupted"
    code, duration = _run(argv, reference, steps, timeout)
    if code != 0:
        return Verdict(False, f"the uninterrupted run failed (exit status {code})", workdir=str(workdir))
    rng = random.Random(seed)
    verdict = Verdict(False, "", workdir=str(workdir))
    for _ in range(kills):
        # a fresh interpreter's start-up is part of `duration`: kill within the same span
        verdict.kills.append(_kill_once(argv, interrupted, steps, mode=mode, expected=duration, rng=rng))
    if not any(kill["killed"] for kill in verdict.kills):
        verdict.reason = "inconclusive: the run finished before any kill landed (make it longer)"
        return verdict
    code, _ = _run(argv, interrupted, steps, timeout)
    if code != 0:
        verdict.reason = f"the resumed run failed (exit status {code})"
        return verdict
    return _compare(reference, interrupted, verdict)


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
@format_option
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
            text = (
                f"killed after {kill['after_s']} s, {where}" if kill["killed"] else "finished before the kill"
            )
            sys.stdout.write(f"  kill {number}: {text}\n")
        if verdict.max_abs_difference is not None:
            sys.stdout.write(
                f"  max |difference| in {verdict.first_difference}: {verdict.max_abs_difference:.3g}\n"
            )
        if keep:
            sys.stdout.write(f"  checkpoints kept in {workdir}\n")
    return 0 if verdict.passed else 1
