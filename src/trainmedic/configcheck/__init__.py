"""Configuration checks (CFG001-CFG004) for DeepSpeed, HF, Accelerate and loop configs.

`check_config` reads the files (a collector's job), turns each into a
`TrainingConfig` observation and runs the pure CFG rules on them, exactly as
`trainmedic run` does when instrumentation reports the config a run loaded.
"""

from __future__ import annotations

from pathlib import Path

from trainmedic.configcheck._normalise import load, recognise
from trainmedic.errors import UsageError
from trainmedic.events import GuardObservation
from trainmedic.evidence.config_model import CONFIG_OBSERVATION, HARDWARE_PRECISIONS, TrainingConfig
from trainmedic.findings import Finding
from trainmedic.record import RunRecord
from trainmedic.registry import rules_for, run_rules

__all__ = [
    "HARDWARE_PRECISIONS",
    "check_config",
    "configs_in_command",
    "load",
    "observation",
    "recognise",
]

_CONFIG_SUFFIXES = (".json", ".yaml", ".yml")
# launcher flags that give the number of processes per node / nodes (deepspeed, torchrun, accelerate)
_PROCESS_FLAGS = (
    "--nproc_per_node",
    "--nproc-per-node",
    "--num_gpus",
    "--num-gpus",
    "--num_processes",
    "--num-processes",
)
_NODE_FLAGS = ("--nnodes", "--num_nodes", "--num-nodes", "--num_machines", "--num-machines")


def observation(config: TrainingConfig) -> GuardObservation:
    """The event that carries one config to the rules (and into a run's events.jsonl)."""
    return GuardObservation(check=CONFIG_OBSERVATION, data=config.to_data())


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
    return run_rules(RunRecord.of(events), rules_for("config check"))


def configs_in_command(argv: list[str], cwd: str | Path = ".") -> list[GuardObservation]:
    """Config observations for the recognisable config files a command line names.

    For `trainmedic run`: `deepspeed --num_gpus 2 train.py --deepspeed ds.json` yields the
    DeepSpeed config checked at world size 2. A file that is not a training config is skipped
    silently: the command is the user's, not a request to check everything it mentions.
    """
    world = _flag_int(argv, _PROCESS_FLAGS)
    nodes = _flag_int(argv, _NODE_FLAGS)
    if world is not None and nodes is not None:
        world *= nodes
    seen: set[Path] = set()
    found: list[GuardObservation] = []
    for arg in argv:
        value = arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg
        if not value.lower().endswith(_CONFIG_SUFFIXES):
            continue
        path = Path(cwd, value)
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        try:
            config = load(path, world_size=world)
        except UsageError:
            continue
        found.append(observation(config))
    return found


def _flag_int(argv: list[str], flags: tuple[str, ...]) -> int | None:
    for i, arg in enumerate(argv):
        name, _, inline = arg.partition("=")
        if name in flags:
            value = inline or (argv[i + 1] if i + 1 < len(argv) else "")
            if value.isdigit() and int(value) > 0:
                return int(value)
    return None
