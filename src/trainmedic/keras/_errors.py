"""The error the Keras guards raise to stop a run that is about to fail anyway."""

from __future__ import annotations

from trainmedic.errors import TrainmedicError
from trainmedic.findings import Finding
from trainmedic.rules.ker import ker002_sequence_len_huge as ker002


class SequenceLenHugeError(TrainmedicError, ValueError):
    """KER002: fit was given a sequence whose shuffled index list cannot fit in memory.

    A ValueError, as Keras raises for other bad `fit` arguments; `.finding` holds
    the evidence.
    """

    def __init__(self, finding: Finding) -> None:
        self.finding = finding
        super().__init__(ker002.stop_message(finding))


SequenceLenHugeError.__module__ = "trainmedic.keras"  # its public home, shown in tracebacks
