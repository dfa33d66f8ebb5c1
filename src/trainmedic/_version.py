"""The version trainmedic reports (the CLI, the run folder's manifest, the reports).

A leaf of its own, so that a module inside the package never imports the package root for it.
"""

from __future__ import annotations

__version__ = "0.1.0"
