"""The error the Keras guards raise to stop a run that is about to fail anyway."""

from __future__ import annotations

from trainmedic.errors import TrainmedicError
from trainmedic.findings import Finding


class SequenceLenHugeError(TrainmedicError, ValueError):
    """KER002: fit was given a sequence whose shuffled index list cannot fit in memory.

    A ValueError, as Keras raises for other bad `fit` arguments; `.finding` holds
    the evidence.
    """

    def __init__(self, finding: Finding) -> None:
        self.finding = finding
        super().__init__(
            f"trainmedic {finding.code} {finding.slug}: {finding.message}. Fix: {finding.fix} "
            "(Set TRAINMEDIC_KER002=warn to let fit run anyway.)"
        )


SequenceLenHugeError.__module__ = "trainmedic.keras"  # its public home, shown in tracebacks
