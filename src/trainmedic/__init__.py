"""trainmedic: catch the silent failures of machine-learning training, with evidence and a fix."""

from __future__ import annotations

from trainmedic.findings import Finding, FindingSpec, Severity

__version__ = "0.1.0"

__all__ = ["Finding", "FindingSpec", "Severity", "__version__"]
