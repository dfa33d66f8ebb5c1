"""Which dataset indices each step's batch held: the offending batch of a NaN loss.

A NaN loss is reported with the indices of the batch it came from, which may be
any batch since the last check. Noting each batch's indices from Python would
cost a call on every step of every run, to serve the rare run that turns NaN.
Instead, when a DataLoader iterator starts an epoch, its sampler iterator is
split with `itertools.tee`: the loader draws from one branch, and the other
buffers the same index lists in C as the loader draws them. The loader's
`__next__` hook, which runs anyway to time the data wait, appends the step each
yielded batch belongs to. Only when a NaN is found are the two paired, in order:
the k-th yielded batch holds the k-th index list drawn (a multi-worker loader
draws a few ahead, and yields in order unless `in_order=False`).

At every check all losses so far have been read, so no earlier batch can be the
culprit: `forget` drops what was noted. A loader that yields for long without
any check (an evaluation pass with no optimizer step) is trimmed to its last
`MAX_NOTED` batches as it goes.
"""

from __future__ import annotations

import itertools
import weakref
from collections import deque
from typing import Any

MAX_NOTED = 4096  # batches noted per loader between two checks: a NaN is read at most `every` steps late
LOG_ATTR = "_tm_batches"  # where a DataLoader iterator keeps its log


class BatchLog(list[int]):
    """The step of every batch one loader iterator yielded since the last check (a plain list,
    appended by the loader's `__next__` hook), and the index lists it drew (`drawn`, a tee)."""

    __slots__ = ("drawn", "taken")

    def __init__(self, drawn: Any) -> None:
        super().__init__()
        self.drawn: Any = drawn  # the tee branch the loader does not read; None once settled
        self.taken: list[tuple[int, Any]] = []  # (step, indices) already paired

    def pair(self) -> list[tuple[int, Any]]:
        """Pair the noted steps with the index lists drawn for them (in C up to here)."""
        if self:
            indices = itertools.islice(self.drawn, len(self)) if self.drawn is not None else ()
            self.taken.extend(zip(self, indices, strict=False))  # a loader cut short drew fewer
            self.clear()
        return self.taken

    def settle(self) -> None:
        """The iterator's epoch ended: keep what it yielded, release the sampler's iterator."""
        self.pair()
        self.drawn = None

    def forget(self, keep: int = 0) -> None:
        """Drop the pairs (and buffered index lists) of all but the last `keep` noted batches."""
        drop = len(self) - keep
        if drop > 0 and self.drawn is not None:
            deque(itertools.islice(self.drawn, drop), maxlen=0)  # advance the buffer, in C
        del self[: max(drop, 0)]
        self.taken.clear()


class LoaderBatches:
    """The logs of the loader iterators the monitor sees, and the lookup a NaN loss makes."""

    def __init__(self) -> None:
        self.logs: list[BatchLog] = []
        self._iterators: list[weakref.ref[Any]] = []

    def start(self, iterator: Any) -> None:
        """An iterator starts an epoch: tee its sampler iterator (before any index is drawn)."""
        old = iterator.__dict__.get(LOG_ATTR)
        if old is not None:  # persistent workers: the same iterator, a new epoch
            old.settle()
        sampler_iter = getattr(iterator, "_sampler_iter", None)
        if sampler_iter is None:
            return
        iterator._sampler_iter, drawn = itertools.tee(sampler_iter)
        log = iterator.__dict__[LOG_ATTR] = BatchLog(drawn)
        self.logs.append(log)
        self._iterators.append(weakref.ref(iterator))

    @staticmethod
    def ended(iterator: Any) -> None:
        log = iterator.__dict__.get(LOG_ATTR)
        if log is not None:
            log.settle()

    def of_step(self, step: int) -> list[int]:
        """The dataset indices of the batches that step `step` trained on (integers only)."""
        found: list[int] = []
        for log in self.logs:
            for noted, index in log.pair():
                if noted == step and type(index) is list and index and isinstance(index[0], int):
                    found.extend(index)
        return found

    def forget(self) -> None:
        """A check read every loss so far: no batch noted up to now is a culprit."""
        alive: list[BatchLog] = []
        iterators: list[weakref.ref[Any]] = []
        for log, ref in zip(self.logs, self._iterators, strict=True):
            log.forget()
            if ref() is not None and log.drawn is not None:
                alive.append(log)
                iterators.append(ref)
        self.logs, self._iterators = alive, iterators
