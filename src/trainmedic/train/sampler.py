"""A sampler whose order depends on (seed, epoch) alone, so resume can start mid-epoch.

Other trainers resume mid-epoch by pulling the skipped batches through the data
pipeline again (hours, for a big dataset). Here the order of epoch `e` is a pure
function of the seed and `e` (like `DistributedSampler`), so a resumed run asks
the sampler to start at sample `i` and the skipped batches are never loaded.

`resumable(loader)` rebuilds a user's DataLoader around this sampler, keeping its
batch size, collate function, workers and the rest. The loader also gets its own
generator, re-seeded every epoch: a DataLoader iterator otherwise draws its base
seed from the global torch RNG, which would shift every random draw after a resume.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from torch.utils.data import (
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
)

import torch

log = logging.getLogger("trainmedic.train")


class ResumableSampler(Sampler[int]):
    """Shuffled (or sequential) indices for one epoch, for one rank, from a start offset."""

    def __init__(
        self,
        size: int,
        *,
        shuffle: bool,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        drop_last: bool = False,
    ) -> None:
        self.size = size
        self.shuffle = shuffle
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.drop_last = drop_last
        self.epoch = 0
        self.start = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def set_start(self, start: int) -> None:
        """Skip the first `start` samples of this rank's share of the epoch."""
        self.start = start

    def epoch_indices(self) -> list[int]:
        """This rank's indices for the current epoch, padded (or cut) to split evenly, as DDP needs."""
        if self.shuffle:
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.size, generator=generator).tolist()
        else:
            order = list(range(self.size))
        if self.world_size > 1:
            if self.drop_last:
                order = order[: self.size - self.size % self.world_size]
            else:
                per_rank = math.ceil(self.size / self.world_size)
                padding = per_rank * self.world_size - self.size
                order += (order * math.ceil(padding / max(self.size, 1)))[:padding]
            order = order[self.rank :: self.world_size]
        return order

    def per_epoch(self) -> int:
        return len(self.epoch_indices()) if self.world_size > 1 else self.size

    def __iter__(self) -> Iterator[int]:
        return iter(self.epoch_indices()[self.start :])

    def __len__(self) -> int:
        return max(self.per_epoch() - self.start, 0)


@dataclass(slots=True)
class ResumableLoader:
    """A DataLoader whose epochs can start at any batch without loading the ones before."""

    loader: DataLoader[Any]
    sampler: ResumableSampler | None  # None: the user's sampler is kept (no exact mid-epoch resume)
    batches_per_epoch: int
    seed: int

    def epoch(self, epoch: int, start_batch: int) -> Iterator[Any]:
        if self.sampler is None:
            return self._replay(epoch, start_batch)
        self.sampler.set_epoch(epoch)
        self.sampler.set_start(start_batch * (self.loader.batch_size or 1))
        if self.loader.generator is not None:
            self.loader.generator.manual_seed(self.seed + epoch)
        return iter(self.loader)

    def _replay(self, epoch: int, start_batch: int) -> Iterator[Any]:
        inner: Any = self.loader.sampler
        if hasattr(inner, "set_epoch"):
            inner.set_epoch(epoch)
        iterator = iter(self.loader)
        if start_batch:
            log.warning(
                "trainmedic: resuming mid-epoch by replaying %d batches (the loader's sampler "
                "is not one trainmedic can position directly)",
                start_batch,
            )
            for _ in range(start_batch):
                next(iterator)
        return iterator


def resumable(loader: DataLoader[Any], *, seed: int, rank: int, world_size: int) -> ResumableLoader:
    """Rebuild `loader` around a ResumableSampler when its sampler is a standard one."""
    original = loader.sampler
    shuffle: bool | None = None
    if isinstance(original, ResumableSampler):
        shuffle = original.shuffle
    elif (
        isinstance(original, RandomSampler)
        and not original.replacement
        and original.num_samples == len(original.data_source)
    ):
        shuffle = True
    elif isinstance(original, SequentialSampler):
        shuffle = False
    elif isinstance(original, DistributedSampler):
        shuffle, seed = original.shuffle, original.seed
    if shuffle is None or loader.batch_size is None or isinstance(loader.dataset, IterableDataset):
        return ResumableLoader(loader=loader, sampler=None, batches_per_epoch=len(loader), seed=seed)
    sampler = ResumableSampler(
        len(loader.dataset),  # type: ignore[arg-type]
        shuffle=shuffle,
        seed=seed,
        rank=rank,
        world_size=world_size,
        drop_last=loader.drop_last,
    )
    generator = torch.Generator()
    rebuilt: DataLoader[Any] = DataLoader(
        loader.dataset,
        batch_size=loader.batch_size,
        sampler=sampler,
        num_workers=loader.num_workers,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory,
        drop_last=loader.drop_last,
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
        multiprocessing_context=loader.multiprocessing_context,
        generator=generator,
        prefetch_factor=loader.prefetch_factor if loader.num_workers > 0 else None,
        persistent_workers=loader.persistent_workers,
        pin_memory_device=loader.pin_memory_device,
    )
    per_rank = sampler.per_epoch()
    batches = per_rank // loader.batch_size if loader.drop_last else math.ceil(per_rank / loader.batch_size)
    return ResumableLoader(loader=rebuilt, sampler=sampler, batches_per_epoch=batches, seed=seed)
