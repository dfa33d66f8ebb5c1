"""The supervisor after long fast runs: its peak memory and its seconds after the trainer's exit.

    PYTHONPATH=src python -m benchmarks.supervisor_soak [--minutes 1,10,60] [--real-seconds 180]

Fed: the events of a fast PyTorch loop (`runfolder_size`'s run: 5,300 steps a second, the
guard's step per 10 steps, clipping reads, memory samples every 2 s), each step also carrying
the constant learning rate such a loop logs, are fed to the real `EventWriter`s for each
number of `--minutes` (simulated times, nothing sleeps). Then a fresh process does what the
supervisor does once the trainer has exited: `LiveDiagnosis.conclude()`, every rule over the
run folder and the report drawn within its budget (`--in-process` draws it in that process
instead, unbounded). Its peak resident memory (polled every 0.1 s), its seconds and the
report's are printed beside the run folder's size. A process that passes `--cap` resident
bytes or `--cap-seconds` is ended and reported as such.

Real (`--real-seconds S`, 0 to skip): `trainmedic run` of a plain PyTorch loop (a linear
model, one thread, a constant learning rate) for S seconds; the supervisor's resident memory
is polled during and after the run, and the seconds from the trainer's exit to the
supervisor's are measured from outside.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
from benchmarks.runfolder_size import STEPS_PER_S, feed, run_events

from trainmedic import runfolder
from trainmedic.eventlog.writer import EventWriter
from trainmedic.events import Event, ProcessExit, ProcessSpawn, RunEnd, RunStart, Step

LR = 1e-3
TRAINER_PID = 24609  # runfolder_size's trainer
CAP_BYTES = 4 * 1024**3
CAP_SECONDS = 600.0


def _with_lr(events: Iterator[Event]) -> Iterator[Event]:
    for event in events:
        is_step = isinstance(event, Step)
        yield dataclasses.replace(event, metrics={**event.metrics, "lr": LR}) if is_step else event


def make_run_folder(run_dir: Path, seconds: float) -> int:
    """A run folder of `seconds` of the fast loop; the number of steps it stands for."""
    t0 = 1.8e9
    command = ["python", "train.py"]
    with EventWriter(run_dir / runfolder.EVENTS) as supervisor:
        supervisor.emit(RunStart(t=t0, pid=24605, command=command, name="soak"))
        supervisor.emit(ProcessSpawn(t=t0, pid=TRAINER_PID, ppid=24605, cmdline=command, role="trainer"))
    feed(_with_lr(run_events(seconds)), run_dir / runfolder.EVENTS)
    with EventWriter(run_dir / runfolder.EVENTS) as supervisor:
        supervisor.emit(ProcessExit(t=t0 + seconds, pid=TRAINER_PID, exit_code=0))
        supervisor.emit(RunEnd(t=t0 + seconds, pid=24605, exit_code=0, duration_s=seconds))
    manifest = runfolder.build_manifest(
        command=command, cwd=str(run_dir), name="soak", started=t0, ended=t0 + seconds, exit_code=0
    )
    runfolder.write_json(run_dir / runfolder.MANIFEST, manifest)
    return int(seconds * STEPS_PER_S)


def post_run(run_dir: Path, *, in_process: bool) -> None:
    """What the supervisor does after the trainer's exit; prints its figures as one JSON line."""
    from trainmedic.verdict import LiveDiagnosis

    if in_process:
        from trainmedic.report.html import write_report as render
    else:
        from trainmedic.report.bounded import write_report_within as render
    started = time.monotonic()
    live = LiveDiagnosis(run_dir, render=render)
    findings = live.conclude()
    figures = {
        "seconds": time.monotonic() - started,
        "findings": sorted(f.code for f in findings),
        "report": getattr(live, "report", {"status": "written"}),
    }
    sys.stdout.write(json.dumps(figures) + "\n")


def watched(command: list[str], cap: int, cap_seconds: float) -> tuple[str, int, float]:
    """Run `command`, polling its resident memory: (stdout or why it was ended, peak, seconds)."""
    started = time.monotonic()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": _path()})
    process, peak, ended = psutil.Process(child.pid), 0, ""
    while child.poll() is None:
        with contextlib.suppress(psutil.Error):
            peak = max(peak, process.memory_info().rss)
        if peak > cap or time.monotonic() - started > cap_seconds:
            child.kill()
            ended = f"ended at {peak / 2**20:,.0f} MiB after {time.monotonic() - started:.0f} s"
            break
        time.sleep(0.1)
    out = child.communicate()[0].decode()
    return ended or out, peak, time.monotonic() - started


def _path() -> str:
    here = Path(__file__).resolve().parent.parent
    return os.pathsep.join([str(here / "src"), str(here), os.environ.get("PYTHONPATH", "")])


def fed(minutes: list[float], *, in_process: bool, cap: int, cap_seconds: float) -> None:
    print(f"{'run':>7} {'steps':>12} {'events.jsonl':>13}  {'post-run':>9} {'peak':>9}  report")
    for m in minutes:
        with tempfile.TemporaryDirectory() as tmp:
            run_dir = Path(tmp)
            steps = make_run_folder(run_dir, m * 60)
            size = (run_dir / runfolder.EVENTS).stat().st_size
            mode = ["--in-process"] if in_process else []
            command = [sys.executable, "-m", "benchmarks.supervisor_soak", "--post-run", tmp, *mode]
            out, peak, seconds = watched(command, cap, cap_seconds)
            try:
                figures = json.loads(out)
            except json.JSONDecodeError:
                print(f"{m:>5g} m {steps:>12,} {size / 1e6:>10.1f} MB  {out}")
                continue
            report = figures["report"]
            said = (
                f"{report.get('seconds', 0):.1f} s, {int(report.get('peak_rss_bytes', 0)) / 2**20:,.0f} MiB"
                if report["status"] == "written" and "seconds" in report
                else report["status"] + (f": {report['reason']}" if "reason" in report else "")
            )
            print(
                f"{m:>5g} m {steps:>12,} {size / 1e6:>10.1f} MB  {seconds:>7.1f} s "
                f"{peak / 2**20:>5,.0f} MiB  {said}"
            )


LOOP = textwrap.dedent(
    """
    import sys, time
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 16), torch.randn(64, 1)
    deadline, step = time.monotonic() + float(sys.argv[1]), 0
    while time.monotonic() < deadline:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        step += 1
        if step % 10000 == 0:
            print(f"step {step} loss {loss.item():.4f} lr {optimizer.param_groups[0]['lr']}", flush=True)
    print(f"done: {step} steps", flush=True)
    """
)


def real(seconds: float, cap: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        script, run_dir = Path(tmp) / "loop.py", Path(tmp) / "run"
        script.write_text(LOOP)
        command = [sys.executable, "-m", "trainmedic", "run", "--quiet", "--out", str(run_dir), "--"]
        command += [sys.executable, str(script), str(seconds)]
        started = time.monotonic()
        supervisor = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": _path()},
        )
        process, peak, trainer_gone, ended = psutil.Process(supervisor.pid), 0, None, ""
        while supervisor.poll() is None:
            try:
                peak = max(peak, process.memory_info().rss)
                has_trainer = any(
                    str(script) in " ".join(c.cmdline()) for c in process.children(recursive=True)
                )
            except psutil.Error:
                has_trainer = False
            if trainer_gone is None and not has_trainer and time.monotonic() - started > 5:
                trainer_gone = time.monotonic()
            if peak > cap:
                supervisor.kill()
                ended = f"supervisor ended at {peak / 2**20:,.0f} MiB"
            time.sleep(0.2)
        out = supervisor.communicate()[0].decode().strip().splitlines()
        after = time.monotonic() - (trainer_gone or time.monotonic())
        manifest = runfolder.read_json(run_dir / runfolder.MANIFEST) or {}
        size = sum(p.stat().st_size for p in run_dir.iterdir()) if run_dir.exists() else 0
        print(
            f"real {seconds:g} s loop: {out[-1] if out else '?'}; supervisor peak {peak / 2**20:,.0f} MiB "
            f"(polled), {after:.1f} s after the trainer's exit; run folder {size / 1e6:.1f} MB; "
            f"manifest: {manifest.get('supervisor', 'no supervisor figures')} {ended}"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", default="1,10,60")
    parser.add_argument("--real-seconds", type=float, default=0.0)
    parser.add_argument("--in-process", action="store_true", help="draw the report in the same process")
    parser.add_argument("--cap", type=int, default=CAP_BYTES, help="resident bytes that end a process")
    parser.add_argument("--cap-seconds", type=float, default=CAP_SECONDS)
    parser.add_argument("--post-run", metavar="RUN_DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.post_run:
        post_run(Path(args.post_run), in_process=args.in_process)
        return
    minutes = [float(m) for m in args.minutes.split(",") if m]
    fed(minutes, in_process=args.in_process, cap=args.cap, cap_seconds=args.cap_seconds)
    if args.real_seconds > 0:
        real(args.real_seconds, args.cap)


if __name__ == "__main__":
    main()
