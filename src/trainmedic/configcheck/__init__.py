"""Configuration checks (CFG001-CFG004) for DeepSpeed, HF, Accelerate and loop configs.

`check_config` reads the files (a collector's job), turns each into a
`TrainingConfig` observation and runs the pure CFG rules on them, exactly as
`trainmedic run` does when instrumentation reports the config a run loaded.
"""

from __future__ import annotations

from pathlib import Path

from trainmedic.configcheck.normalise import load, recognise
from trainmedic.errors import UsageError
from trainmedic.events import GuardObservation
from trainmedic.findings import Finding
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules
from trainmedic.rules import config as cfg_rules
from trainmedic.rules.config import CONFIG_CHECK, HARDWARE_PRECISIONS, TrainingConfig

__all__ = ["HARDWARE_PRECISIONS", "check_config", "load", "observation", "recognise"]


def observation(config: TrainingConfig) -> GuardObservation:
    """The event that carries one config to the rules (and into a run's events.jsonl)."""
    return GuardObservation(check=CONFIG_CHECK, data=config.to_data())


def check_config(
    path: str | Path,
    *,
    world_size: int | None = None,
    hardware: str | None = None,
    reference: str | Path | None = None,
) -> list[Finding]:
    """Findings for one config file (and a reference config for CFG003); UsageError on bad input."""
    if world_size is not None and world_size < 1:
        raise UsageError(f"--world-size must be a positive integer, got {world_size}")
    if hardware is not None and hardware not in HARDWARE_PRECISIONS:
        raise UsageError(f"--hardware must be one of {', '.join(HARDWARE_PRECISIONS)}, got {hardware!r}")
    events = [observation(load(path, world_size=world_size, hardware=hardware))]
    if reference is not None:
        events.append(observation(load(reference, world_size=world_size, role="reference")))
    return run_rules(RunRecord.of(events), cfg_rules.RULES)
