"""trainmedic: catch the silent failures of machine-learning training, with evidence and a fix."""

from __future__ import annotations

from trainmedic._version import __version__
from trainmedic.errors import TrainmedicError
from trainmedic.findings import Finding, FindingSpec, Severity

__all__ = ["Finding", "FindingSpec", "Severity", "TrainmedicError", "__version__"]


def load_ipython_extension(ipython: object) -> None:
    """`%load_ext trainmedic`: findings shown in the notebook as they happen; `%trainmedic last`.
    Imported here only when IPython asks, so `import trainmedic` stays light."""
    from trainmedic.notebook import extension

    extension.load(ipython)


def unload_ipython_extension(ipython: object) -> None:
    from trainmedic.notebook import extension

    extension.unload(ipython)
