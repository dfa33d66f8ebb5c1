"""`trainmedic` entry point, and the one place usage errors become one line.

click's own usage errors (bad option, missing argument) and trainmedic's
`UsageError` are both printed as a single `trainmedic: error: ...` line with exit
status 2, never a traceback.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Sequence

import click

from trainmedic.cli.group import cli
from trainmedic.errors import ExitCode, UsageError


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return the exit status (for `python -m trainmedic` and tests)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = cli.main(args=args, prog_name="trainmedic", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        return ExitCode.USAGE_ERROR
    except click.UsageError as exc:
        return usage_error(exc.format_message())
    except UsageError as exc:
        return usage_error(exc.message)
    except click.exceptions.Abort:
        click.echo("trainmedic: aborted", err=True)
        return 130
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        return usage_error(exc.format_message())
    except BrokenPipeError:
        return ExitCode.OK
    return int(result) if isinstance(result, int) else ExitCode.OK


def usage_error(message: str) -> int:
    sys.stderr.write(f"trainmedic: error: {' '.join(message.split())}\n")
    return ExitCode.USAGE_ERROR


def entry() -> None:
    """The console script: run, then exit without the interpreter's teardown when that is safe."""
    status = main()
    _exit_without_teardown(status)


def _exit_without_teardown(status: int) -> None:
    """Run the exit handlers, flush, and leave: skip freeing every module and object.

    A supervised run has imported a few hundred modules by its end; tearing them down is a
    real share of the supervisor's fixed cost per run (docs/supervise.md, Overhead), for
    nothing: every file is closed and the process ends. The
    exit handlers (logging, finalizers) still run. Where a non-daemon thread is still
    running, the normal exit waits for it, as Python would.
    """
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if any(t.is_alive() for t in others):
        sys.exit(status)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe: nothing left to say
            stream.flush()
    os._exit(status)
