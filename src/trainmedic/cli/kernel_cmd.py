"""`trainmedic kernel install|list|uninstall`: a Jupyter kernel supervised by `trainmedic run`."""

from __future__ import annotations

import json
import sys

import click

from trainmedic.cli.options import plain_format_option
from trainmedic.errors import UsageError
from trainmedic.notebook import kernelspec


@click.group("kernel")
def command() -> None:
    """A Jupyter kernel that says why it died: ipykernel under trainmedic's supervisor."""


@command.command("install", short_help="Install a trainmedic kernel (a kernelspec Jupyter starts).")
@click.option("--name", default=kernelspec.DEFAULT_NAME, show_default=True, help="Kernelspec name.")
@click.option("--display-name", metavar="TEXT", help="Name shown in Jupyter's kernel picker.")
@click.option(
    "--memory-limit", metavar="SIZE", help="Run each kernel under this memory limit (cgroup), e.g. 8G."
)
@click.option(
    "--hang-timeout",
    metavar="SECONDS",
    type=click.FloatRange(min=0),
    help="Seconds a cell may run without progress and CPU before a hang is reported (default 1800).",
)
@click.option("--user", "scope", flag_value="user", default=True, help="Install for this user (default).")
@click.option(
    "--sys-prefix", "scope", flag_value="sys-prefix", help=f"Install into this environment ({sys.prefix})."
)
@click.option("--prefix", metavar="DIR", help="Install under DIR/share/jupyter/kernels.")
def install_command(
    *,
    name: str,
    display_name: str | None,
    memory_limit: str | None,
    hang_timeout: float | None,
    scope: str,
    prefix: str | None,
) -> int:
    """Install the kernelspec: `trainmedic run -- python -m ipykernel_launcher` for every kernel start."""
    if prefix is not None and scope == "sys-prefix":
        raise UsageError("--prefix and --sys-prefix: expected one of them, not both")
    if scope == "sys-prefix":
        prefix = sys.prefix
    folder = kernelspec.install(
        name=name,
        display_name=display_name,
        memory_limit=memory_limit,
        hang_timeout=hang_timeout,
        user=prefix is None,
        prefix=prefix,
    )
    click.echo(f"installed kernel {name!r} in {folder}")
    return 0


@command.command("list")
@plain_format_option
def list_command(fmt: str) -> int:
    """List the trainmedic kernels Jupyter sees."""
    kernels = kernelspec.installed()
    if fmt == "json":
        click.echo(json.dumps({"kernels": [k.to_dict() for k in kernels]}, indent=2))
        return 0
    if not kernels:
        click.echo("no trainmedic kernels (install one: trainmedic kernel install)")
    for k in kernels:
        limit = f"  memory limit {k.memory_limit}" if k.memory_limit else ""
        click.echo(f"{k.name}  {k.display_name!r}  {k.resource_dir}{limit}")
    return 0


@command.command("uninstall")
@click.argument("name")
def uninstall_command(name: str) -> int:
    """Remove a trainmedic kernel."""
    folder = kernelspec.uninstall(name)
    click.echo(f"removed kernel {name!r} ({folder})")
    return 0
