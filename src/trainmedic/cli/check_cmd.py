"""`trainmedic check ...`: a group whose subcommands live in their own modules.

Every module `trainmedic/cli/check_<name>.py` that exposes `command` (a
click.Command) becomes `trainmedic check <name>`, imported only when used: a
new check (e.g. `check config`) is one new file, and this one does not change.
"""

from __future__ import annotations

import importlib
import pkgutil

import click

from trainmedic import cli as _cli_package

_PREFIX = "check_"


class CheckGroup(click.Group):
    def _modules(self) -> dict[str, str]:
        found = {}
        for info in pkgutil.iter_modules(_cli_package.__path__):
            if info.name.startswith(_PREFIX) and not info.name.endswith("_cmd"):
                found[info.name[len(_PREFIX) :].replace("_", "-")] = f"trainmedic.cli.{info.name}"
        return found

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self._modules())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = self._modules().get(cmd_name)
        if module is None:
            return None
        command = importlib.import_module(module).command
        assert isinstance(command, click.Command)
        return command


@click.group("check", cls=CheckGroup)
def command() -> None:
    """Check data (or a saved input contract) before training; exit 1 on findings."""
