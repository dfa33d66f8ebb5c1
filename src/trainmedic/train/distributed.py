"""torch.distributed for the loop: one process per device, launched by torchrun.

The loop never decides topology: torchrun sets RANK / WORLD_SIZE / LOCAL_RANK and
`setup` joins the group (gloo on CPU, NCCL on GPU). Everything rank-dependent the
loop needs is here: wrapping (DDP or FSDP2), averaging metrics, gathering the RNG
states of all ranks for rank 0's checkpoint, and a barrier.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch.distributed as dist

import torch
from torch import nn
from trainmedic.train.config import ConfigError


@dataclass(frozen=True, slots=True)
class World:
    """This process's place in a torchrun job (rank, world size, strategy)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    strategy: str = "none"  # none | ddp | fsdp

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def setup(strategy: str) -> World:
    """Join the process group torchrun prepared (if any) and decide the strategy."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size > 1 and not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend=backend)
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if dist.is_initialized():
        rank, world_size = dist.get_rank(), dist.get_world_size()
    else:
        rank, world_size = 0, 1
    if strategy == "auto":
        chosen = "ddp" if world_size > 1 else "none"
    elif strategy == "ddp" and world_size == 1:
        chosen = "none"  # DDP of one process is the plain model
    else:
        chosen = strategy
    if chosen == "fsdp" and not dist.is_initialized():
        raise ConfigError("strategy='fsdp' needs torch.distributed: launch with torchrun")
    return World(
        rank=rank, world_size=world_size, local_rank=int(os.environ.get("LOCAL_RANK", "0")), strategy=chosen
    )


def wrap(model: nn.Module, world: World, device: torch.device) -> nn.Module:
    """DDP or FSDP2 around the model; the plain model otherwise."""
    if world.strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        if isinstance(model, DistributedDataParallel):
            return model
        device_ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=device_ids)
    if world.strategy == "fsdp":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh(device.type, (world.world_size,))
        fully_shard(model, mesh=mesh)
    return model


def unwrap(model: nn.Module) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel

    return model.module if isinstance(model, DistributedDataParallel) else model


@contextlib.contextmanager
def no_grad_sync(model: nn.Module, world: World, skip: bool) -> Iterator[None]:
    """Skip the gradient all-reduce on accumulation micro-steps (it runs once per window)."""
    if not skip or world.strategy == "none":
        yield
    elif world.strategy == "ddp":
        with model.no_sync():  # type: ignore[operator]
            yield
    else:  # FSDP2
        model.set_requires_gradient_sync(False)  # type: ignore[operator]
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)  # type: ignore[operator]


def reduce_sums(sums: Mapping[str, torch.Tensor], world: World) -> dict[str, float]:
    """Sum per-rank tensors across ranks; one collective, one host sync."""
    names = sorted(sums)
    if not names:
        return {}
    packed = torch.stack([sums[n].detach().double().reshape(()) for n in names])
    if world.distributed:
        packed = packed.to(_collective_device())
        dist.all_reduce(packed, op=dist.ReduceOp.SUM)
    values = packed.cpu().tolist()
    return dict(zip(names, values, strict=True))


def _collective_device() -> torch.device:
    backend = dist.get_backend() if dist.is_initialized() else "gloo"
    return torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")


def gather(obj: Any, world: World) -> list[Any]:
    """Every rank's `obj`, in rank order (a one-element list when not distributed)."""
    if not world.distributed:
        return [obj]
    out: list[Any] = [None] * world.world_size
    dist.all_gather_object(out, obj)
    return out


def broadcast(obj: Any, world: World) -> Any:
    """Rank 0's `obj` on every rank."""
    if not world.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier(world: World) -> None:
    if world.distributed:
        dist.barrier()
