"""`trainmedic run [OPTIONS] -- CMD ARGS...`: supervise a training command to the end.

Exits with the command's own status (128+N when killed by signal N), like `time`, so it
drops into any scheduler script; 127 when the command does not exist, 126 when it cannot
be executed; 2 for bad options.

Parsed with argparse, not click like the other commands: `run` starts every training run,
and the supervisor's CPU is budgeted (at most 1 % of a 20-second job, benchmarks/
supervise_overhead.py). Importing click costs about 17 ms of the supervisor's ~180 ms;
the console script (`cli.main.entry`) sends `run` here without importing it.
`cli/run_cmd.py` is the click face of this command in `trainmedic --help`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from trainmedic.errors import ExitCode, UsageError

ON_HANG = ("wait", "stop")
RUNS_DIR_ENV = "TRAINMEDIC_RUNS_DIR"  # where run folders go without --out (e.g. a notebook kernel's)
FORMATS = ("text", "json")
USAGE = "trainmedic run [OPTIONS] -- CMD ARGS..."
SUMMARY = (
    "Run CMD under supervision: the real trainer behind any launcher, memory by phase, how it "
    "ended and why. The run folder holds events.jsonl, output.log, findings.json, "
    "manifest.json, report.html."
)


class _BadOption(Exception):
    """argparse's complaint about the command line, to be printed as one line."""


class _Formatter(argparse.HelpFormatter):
    """argparse's own, given its width: left to itself it imports shutil (which loads bz2 and
    lzma) for the terminal's width, ~3 ms of every run, while building the parser."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_columns() - 2)


def _columns() -> int:
    """The terminal's width as shutil.get_terminal_size gives it: $COLUMNS, the terminal, 80."""
    import os

    with contextlib.suppress(ValueError):
        if int(os.environ.get("COLUMNS", "0")) > 0:
            return int(os.environ["COLUMNS"])
    try:
        return os.get_terminal_size(1).columns or 80  # stdout, as shutil asks
    except (ValueError, OSError):
        return 80


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _BadOption(message)


def _number(kind: Callable[[str], float], low: float, what: str) -> Callable[[str], float]:
    def convert(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return convert


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="trainmedic run",
        usage=USAGE,
        description=SUMMARY,
        allow_abbrev=False,  # as click: an option is spelled out
        formatter_class=_Formatter,
    )
    add = p.add_argument
    add(
        "--out",
        metavar="DIR",
        help=f"Run folder (default runs/<time>-<name>/, or under ${RUNS_DIR_ENV} when set).",
    )
    add("--name", help="Name of the run (default: the script's name).")
    add(
        "--expect-epochs",
        metavar="N",
        type=_number(int, 1, "an integer >= 1"),
        help="Epochs the run must complete.",
    )
    add("--memory-limit", metavar="SIZE", help="Run the trainer under this memory limit (cgroup), e.g. 6G.")
    add(
        "--hang-timeout",
        metavar="SECONDS",
        type=_number(float, 0, "a number of seconds >= 0"),
        default=1800.0,
        help="Seconds without progress and CPU before a hang is reported (0: off). Default 1800.",
    )
    add(
        "--on-hang",
        choices=ON_HANG,
        default="wait",
        help="After a hang: keep waiting, or stop the trainer. Default wait.",
    )
    add(
        "--restarts",
        metavar="N",
        type=_number(int, 0, "an integer >= 0"),
        default=0,
        help="Restart a failed run N times. Default 0.",
    )
    add(
        "--sample-interval",
        metavar="SECONDS",
        type=_number(float, 0.05, "a number of seconds >= 0.05"),
        default=0.5,
        help="Seconds between memory samples (stretches up to 4x while memory is flat). Default 0.5.",
    )
    add(
        "--grace",
        metavar="SECONDS",
        type=_number(float, 0, "a number of seconds >= 0"),
        default=10.0,
        help="Seconds between SIGINT, SIGTERM and SIGKILL when stopping. Default 10.",
    )
    add("--quiet", action="store_true", help="No status lines; only the diagnosis at the end.")
    add("--no-instrument", action="store_true", help="Do not load the in-process instrumentation.")
    add("--format", dest="fmt", choices=FORMATS, default="text", help="Output format. Default text.")
    add("command", nargs=argparse.REMAINDER, metavar="CMD ARGS...", help="The command to supervise.")
    return p


def main(argv: Sequence[str]) -> int:
    """`trainmedic run` with these arguments; the exit status (usage errors: one line, 2)."""
    try:
        options = parser().parse_args(list(argv))
    except _BadOption as exc:
        return usage_error(str(exc))
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    command = list(options.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        return usage_error(f"no command given: expected `{USAGE}`")
    try:
        return _run(options, command)
    except UsageError as exc:
        return usage_error(exc.message)
    except BrokenPipeError:
        return ExitCode.OK


def usage_error(message: str) -> int:
    sys.stderr.write(f"trainmedic: error: {' '.join(message.split())}\n")
    return ExitCode.USAGE_ERROR


def _run(opts: argparse.Namespace, command: list[str]) -> int:
    import os

    from trainmedic.supervise import CommandNotFound, RunOptions, Supervisor
    from trainmedic.supervise.cgroup import parse_size

    out = Path(opts.out) if opts.out is not None else None
    if out is not None and out.exists() and not out.is_dir():
        raise UsageError(f"--out: {out} exists and is not a folder")
    options = RunOptions(
        command=command,
        out=out,
        name=opts.name,
        expect_epochs=opts.expect_epochs,
        memory_limit=parse_size(opts.memory_limit) if opts.memory_limit is not None else None,
        hang_timeout=opts.hang_timeout,
        on_hang=opts.on_hang,
        restarts=opts.restarts,
        sample_interval=opts.sample_interval,
        grace=opts.grace,
        quiet=opts.quiet,
        instrument=not opts.no_instrument and os.environ.get("TRAINMEDIC_INSTRUMENT", "1") != "0",
        runs_base=Path(os.environ.get(RUNS_DIR_ENV) or "runs"),
    )
    try:
        supervisor = Supervisor(options)
    except CommandNotFound as exc:
        sys.stderr.write(f"trainmedic: error: {exc}\n")
        return exc.status
    outcome = supervisor.run()
    err = sys.stderr
    if opts.fmt == "json":  # one line on stderr, after the trainer's output (stdout stays the trainer's)
        document = {
            "run_dir": str(outcome.run_dir),
            "exit_status": outcome.exit_status,
            "attempts": outcome.attempts,
            "findings": [f.to_dict() for f in outcome.findings],
        }
        err.write(json.dumps(document, allow_nan=False) + "\n")
        return outcome.exit_status
    from trainmedic.report.text import render_text  # after the run: rich costs nothing while it trains

    err.flush()
    render_text(outcome.findings, err, title=f"\ntrainmedic diagnosis (exit status {outcome.exit_status}):")
    err.write(f"trainmedic: run folder {outcome.run_dir}\n")
    report = outcome.run_dir / "report.html"
    if report.is_file():
        err.write(f"trainmedic: report {report}\n")
    return outcome.exit_status
