"""The one error type a user sees, and the exit-code contract.

A usage error is raised anywhere below the CLI with a message that names the
file or option and what was expected; the CLI edge catches it once, prints it
as one line and exits 2. Nothing else is allowed to reach the user as a
traceback for bad input.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit statuses of `check`, `diagnose`, `diff`, `rules`, `explain`.

    `trainmedic run` is the exception: it exits with its child's status, like `time`.
    """

    OK = 0
    FINDINGS = 1
    USAGE_ERROR = 2


class UsageError(Exception):
    """Bad input from the user: an option, a file, a value. Printed as one line, exit 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
