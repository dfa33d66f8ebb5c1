"""`trainmedic.checkpoint`: the checkpoints of `trainmedic.train.fit`, usable on their own.

The code lives in `trainmedic.train.checkpoint`; this module keeps the public path.
"""

from __future__ import annotations

# Besides __all__, what other code imports from this path: the constants, the file hash and the
# payload writer (the fault tests patch its write).
from trainmedic.train._checkpoint_io import _hash_file, _HashingWriter  # noqa: F401
from trainmedic.train.checkpoint import (  # noqa: F401
    FORMAT,
    KILL_IN_WRITE_ENV,
    TMP_SUFFIX,
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
