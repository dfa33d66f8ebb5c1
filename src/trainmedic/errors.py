"""trainmedic's exception root, the one error type a user sees, and the exit-code contract.

Every exception trainmedic raises derives from `TrainmedicError`, so
`except TrainmedicError` catches all of them; each also keeps the built-in base
its callers may catch (`SequenceLenHugeError` is a `ValueError`,
`NonFiniteLossError` a `RuntimeError`).

A usage error is raised anywhere below the CLI with a message that names the
file or option and what was expected; the CLI edge catches it once, prints it
as one line and exits 2. Nothing else is allowed to reach the user as a
traceback for bad input.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ExitCode", "TrainmedicError", "UsageError", "install_hint"]


class ExitCode(IntEnum):
    """Exit statuses of `check`, `diagnose`, `diff`, `rules`, `explain`.

    `trainmedic run` is the exception: it exits with its child's status, like `time`.
    """

    OK = 0
    FINDINGS = 1
    USAGE_ERROR = 2


class TrainmedicError(Exception):
    """The base of every exception trainmedic raises."""


class UsageError(TrainmedicError):
    """Bad input from the user: an option, a file, a value. Printed as one line, exit 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def install_hint(packages: str, extra: str) -> str:
    """How to install what a missing framework needs, for the end of an error message.

    trainmedic installs from its checkout, not from an index, so an extra is named as the
    checkout's (`pip install -e '.[hf]'`); the packages themselves come first because they
    are what the trainer's own environment needs, wherever trainmedic was installed from.
    """
    return f"pip install {packages} (or, in trainmedic's checkout, pip install -e '.[{extra}]')"
