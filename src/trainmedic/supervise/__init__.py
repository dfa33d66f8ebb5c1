"""The supervisor behind `trainmedic run`: process tree, launchers, memory, signals, endings.

Collectors only: it touches processes, cgroups and files, and turns what it
sees into events; `trainmedic.rules` decides what they mean.
"""

from trainmedic.supervise.supervisor import CommandNotFound, RunOptions, RunOutcome, Supervisor

__all__ = ["CommandNotFound", "RunOptions", "RunOutcome", "Supervisor"]
