"""Sharded checkpoints for FSDP2 with torch.distributed.checkpoint (DCP).

Each rank writes its own shards of the model and optimizer into `step-N.dcp/`
(no rank gathers the full model: that is what runs out of memory at scale). Then
rank 0 writes the rest of the state (progress, every rank's RNG, config) as the
usual `step-N.pt` and a manifest listing and hashing every shard: the checkpoint
counts only once that manifest exists, as for unsharded ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from torch.optim import Optimizer

from torch import nn
from trainmedic.train import distributed as dist_
from trainmedic.train.checkpoint._files import CheckpointError
from trainmedic.train.checkpoint._files import load as load_checkpoint
from trainmedic.train.checkpoint._manager import CheckpointManager
from trainmedic.train.checkpoint._writing import hash_file
from trainmedic.train.config import FitConfig


class _Position(Protocol):
    @property
    def step(self) -> int: ...
    @property
    def epoch(self) -> int: ...


class ShardedRun(Protocol):
    """What a sharded save or load needs from a `fit` run (`trainmedic.train._state.RunState`)."""

    @property
    def config(self) -> FitConfig: ...
    @property
    def progress(self) -> _Position: ...
    @property
    def model(self) -> nn.Module: ...
    @property
    def optimizer(self) -> Optimizer: ...
    @property
    def world(self) -> dist_.World: ...
    @property
    def manager(self) -> CheckpointManager | None: ...
    def state_dict(self) -> dict[str, Any]:
        """The full state; a sharded save keeps all but the model and optimizer (the shards hold them)."""
        ...


def _hash(path: Path) -> dict[str, Any]:
    digest, size = hash_file(path)
    return {"crc32": digest, "bytes": size}


def save(run: ShardedRun, rng: list[Any], metrics: Mapping[str, float]) -> None:
    from torch.distributed.checkpoint import state_dict_saver
    from torch.distributed.checkpoint.state_dict import get_state_dict

    assert run.config.checkpoint_dir is not None
    directory = Path(run.config.checkpoint_dir)
    name = f"step-{run.progress.step:08d}"
    shards = directory / f"{name}.dcp"
    model_state, optimizer_state = get_state_dict(run.model, run.optimizer)
    state_dict_saver.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=str(shards))
    dist_.barrier(run.world)
    if run.manager is None:
        return
    files = {f"{shards.name}/{p.name}": _hash(p) for p in sorted(shards.iterdir()) if p.is_file()}
    state = run.state_dict()
    del state["model"], state["optimizer"]
    state["rng"] = rng
    state["sharded"] = shards.name
    run.manager.save(
        state, step=run.progress.step, epoch=run.progress.epoch, metrics=metrics, extra_files=files
    )


def load(run: ShardedRun, source: Path) -> dict[str, Any]:
    """Every rank reads its shards of the sharded checkpoint whose manifest is `source`."""
    from torch.distributed.checkpoint import state_dict_loader
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    state, info = load_checkpoint(source)
    if "sharded" not in state:
        raise CheckpointError(f"{source}: not a sharded checkpoint (saved without FSDP)")
    shards = info.directory / str(state["sharded"])
    model_state, optimizer_state = get_state_dict(run.model, run.optimizer)
    state_dict_loader.load({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=str(shards))
    set_state_dict(run.model, run.optimizer, model_state_dict=model_state, optim_state_dict=optimizer_state)
    return state
