"""Where the run's epochs come from, as the monitor knows them.

A framework callback (Lightning, HF) reports its epochs itself (`framework_epochs`), or a
DataLoader's pass is one (`on_loader_start`, `on_loader_exhausted`, once per pass, never
per step); a loop that draws its batches itself has no known epoch (`known_epoch` is None).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch.utils.data import DistributedSampler

from trainmedic.torch._batches import LOG_ATTR

#: Where a DistributedSampler keeps the log of the loader pass it orders, until the pass starts
#: drawing from it (`_hygiene.LoopHygiene.on_sampler_iter` takes it: did that pass train?).
PASS_LOG_ATTR = "_tm_pass_log"

if TYPE_CHECKING:
    from trainmedic.torch._batches import LoaderBatches
    from trainmedic.torch._curve import LossCurve
    from trainmedic.torch._interface import MonitorLike


class Epochs:
    """The loaders' passes: where each starts, the batches it draws, and the `Epoch` it ends with."""

    def __init__(self, monitor: MonitorLike, batches: LoaderBatches, curve: LossCurve) -> None:
        self.monitor = monitor
        self.batches = batches
        self.curve = curve

    def known_epoch(self) -> int | None:
        """The epoch, where epochs are counted (a DataLoader's passes, a framework's callback);
        None in a loop that draws its batches itself, whose epochs are not known."""
        monitor = self.monitor
        return monitor.epoch if monitor.loaders_seen or monitor.framework_epochs else None

    def on_loader_start(self, iterator: Any) -> None:
        """A DataLoader iterator starts an epoch: note where, and follow the indices it draws."""
        monitor = self.monitor
        iterator.__dict__["_tm_start_step"] = monitor.step
        monitor.loaders_seen = True
        self.batches.start(iterator)
        index = getattr(iterator, "_index_sampler", None)  # a BatchSampler, or the sampler itself
        sampler = getattr(index, "sampler", index)
        log = iterator.__dict__.get(LOG_ATTR)
        if log is not None and isinstance(sampler, DistributedSampler):
            sampler.__dict__[PASS_LOG_ATTR] = log

    def on_loader_exhausted(self, iterator: Any) -> None:
        self.batches.ended(iterator, self.monitor.step + 1)
        self.curve.on_loader_exhausted(iterator)
