"""Command groups whose subcommands are modules, found by name and imported on use.

`trainmedic <name>` comes from `cli/<name>_cmd.py`, `trainmedic check <name>` from
`cli/check_<name>.py`; each exposes `command` (a click.Command). A new command is one
new file, and `trainmedic explain` never pays for the supervisor's or a framework's
imports.
"""

from __future__ import annotations

import importlib
import pkgutil

import click

from trainmedic import cli as _cli_package


class ModuleGroup(click.Group):
    """A click group listing the modules of `trainmedic.cli` that match `prefix*suffix`."""

    prefix = ""
    suffix = ""

    def _modules(self) -> dict[str, str]:
        found = {}
        for info in pkgutil.iter_modules(_cli_package.__path__):
            name = info.name
            if not (name.startswith(self.prefix) and name.endswith(self.suffix)):
                continue
            if self.suffix == "" and name.endswith("_cmd"):  # a top-level command, not ours
                continue
            stem = name[len(self.prefix) : len(name) - len(self.suffix)]
            if stem:
                found[stem.replace("_", "-")] = f"trainmedic.cli.{name}"
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


class TopLevelGroup(ModuleGroup):
    suffix = "_cmd"


class CheckGroup(ModuleGroup):
    prefix = "check_"
