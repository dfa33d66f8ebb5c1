"""`python -m trainmedic` runs the CLI."""

from trainmedic.cli.main import entry

entry()
