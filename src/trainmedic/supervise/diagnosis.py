"""What the supervisor needs from the diagnosis, so that it never imports the renderers.

The supervisor collects; judging the events (rules) and writing findings.json and
report.html is `report.diagnosis.LiveDiagnosis`'s work. `cli/run_cmd.py` hands that
class to the supervisor, which makes one per run folder and tells it every event.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from trainmedic.events import Event
from trainmedic.findings import Finding


class Diagnosis(Protocol):
    """The diagnosis of one run folder, kept current while the run goes on."""

    def note(self, event: Event) -> None:
        """An event the supervisor wrote: may it make the diagnosis due? (Any thread.)"""

    def refresh(self) -> bool:
        """Diagnose now if due; True when findings.json and report.html were rewritten."""

    def conclude(self) -> list[Finding]:
        """The run has ended: diagnose every event and write the outputs; the findings."""


#: Makes the diagnosis of a run folder (the supervisor calls it once the folder exists).
DiagnosisFactory = Callable[[Path], Diagnosis]
