"""`trainmedic.checkpoint`: the checkpoints of `trainmedic.train.fit`, usable on their own.

The code lives in the package `trainmedic.train.checkpoint`; this module keeps the public path.
"""

from __future__ import annotations

from trainmedic.train.checkpoint import (
    CheckpointError,
    CheckpointInfo,
    CheckpointManager,
    CorruptCheckpointError,
    Loaded,
    Stager,
    code_commit,
    list_checkpoints,
    load,
    load_latest,
    restore_rng_state,
    rng_state,
    save,
    verify,
)

__all__ = [
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointManager",
    "CorruptCheckpointError",
    "Loaded",
    "Stager",
    "code_commit",
    "list_checkpoints",
    "load",
    "load_latest",
    "restore_rng_state",
    "rng_state",
    "save",
    "verify",
]
