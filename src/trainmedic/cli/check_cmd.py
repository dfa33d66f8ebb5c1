"""`trainmedic check ...`: a group whose subcommands live in their own modules.

Every module `trainmedic/cli/check_<name>.py` that exposes `command` (a
click.Command) becomes `trainmedic check <name>`, imported only when used: a
new check (e.g. `check config`) is one new file, and this one does not change.
"""

from __future__ import annotations

import click

from trainmedic.cli.discovery import CheckGroup


@click.group("check", cls=CheckGroup)
def command() -> None:
    """Check data, a saved input contract or a training config before training; exit 1 on findings."""
