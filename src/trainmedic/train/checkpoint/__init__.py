"""Checkpoints that survive a kill at any instant, and say when they are damaged.

nanoGPT's `torch.save(checkpoint, "ckpt.pt")` is the counter-example: a kill during
the write leaves a truncated file in place of the only good one. Here a checkpoint
only counts once it is complete (torchtitan's rule): the payload is written to a
temporary file, fsynced, renamed over its final name, and the directory fsynced;
then a small JSON manifest with the payload's CRC-32 and size is written the same
way. A checkpoint without a manifest never existed. Loading re-hashes the payload,
and `load_latest` falls back to the newest intact checkpoint, naming the damaged
ones it skipped.

Payloads are loaded with `torch.load(weights_only=True)`: a checkpoint file from
elsewhere cannot run code on load. So everything saved here is tensors, numbers,
strings, lists and dicts (RNG states included, see `rng_state`).

    manager = CheckpointManager("ckpt", keep_last=3, best_metric="val_loss")
    manager.save(state, step=120, epoch=2, metrics={"val_loss": 0.31})
    manager.save_async(state, step=130, epoch=2)  # copies, then writes on a thread
    manager.wait()                         # durable (and its error, if any, raised)
    loaded = load_latest("ckpt")           # newest intact, or None
    state = loaded.state if loaded else None

One job a module: `_writing` (files complete or absent, checksummed on the way to disk),
`_files` (one checkpoint: its payload and manifest, saved, verified, loaded), `_manager`
(rotation, `best`, background saves), `_staging` (the copy a background save writes),
`_rng` (the random generators' states), `_sharded` (FSDP's sharded checkpoints, for `fit`).
`trainmedic.checkpoint` is the public path of this package's API.
"""

from __future__ import annotations

from trainmedic.atomicfile import TMP_SUFFIX
from trainmedic.envinfo._git import code_commit
from trainmedic.train.checkpoint._files import (
    FORMAT,
    CheckpointError,
    CheckpointInfo,
    CorruptCheckpointError,
    Loaded,
    list_checkpoints,
    load,
    load_latest,
    save,
    verify,
)
from trainmedic.train.checkpoint._manager import CheckpointManager
from trainmedic.train.checkpoint._rng import restore_rng_state, rng_state
from trainmedic.train.checkpoint._staging import Stager
from trainmedic.train.checkpoint._writing import KILL_IN_WRITE_ENV

__all__ = [
    "FORMAT",
    "KILL_IN_WRITE_ENV",
    "TMP_SUFFIX",
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
