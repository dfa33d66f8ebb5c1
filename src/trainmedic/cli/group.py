"""The `trainmedic` click group: its subcommands are the `cli/*_cmd.py` modules (see discovery)."""

from __future__ import annotations

import click

from trainmedic._version import __version__
from trainmedic.cli.discovery import TopLevelGroup


@click.group(cls=TopLevelGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="trainmedic")
def cli() -> None:
    """trainmedic: catch the silent failures of ML training, with evidence and a fix."""
