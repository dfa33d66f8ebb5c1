"""`trainmedic check ...`: checks before training. (Minimal group of the `breadth` branch; the
`data` branch's group replaces it at merge and attaches `check_config.command`.)"""

from __future__ import annotations

import click

from trainmedic.cli import check_config


@click.group("check")
def command() -> None:
    """Check data or a training config before training."""


command.add_command(check_config.command)
