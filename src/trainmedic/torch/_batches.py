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
`MAX_NOTED` batches as it goes, and so are the finished epochs kept between two
checks (a process that only evaluates has no check at all).
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

    __slots__ = ("drawn", "iterator", "taken")

    def __init__(self, iterator: Any, drawn: Any) -> None:
        super().__init__()
        self.iterator = weakref.ref(iterator)
        self.drawn: Any = drawn  # the tee branch the loader does not read; None once settled
        self.taken: list[tuple[int, Any]] = []  # (step, indices) already paired

    @property
    def done(self) -> bool:
        """Its epoch ended, or its iterator is gone: nothing more will be noted in it."""
        return self.drawn is None or self.iterator() is None

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
        del self.taken[:-MAX_NOTED]
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

    def start(self, iterator: Any) -> None:
        """An iterator starts an epoch: tee its sampler iterator (before any index is drawn)."""
        old = iterator.__dict__.get(LOG_ATTR)
        if old is not None:  # persistent workers: the same iterator, a new epoch
            old.settle()
        sampler_iter = getattr(iterator, "_sampler_iter", None)
        if sampler_iter is None:
            return
        iterator._sampler_iter, drawn = itertools.tee(sampler_iter)
        log = iterator.__dict__[LOG_ATTR] = BatchLog(iterator, drawn)
        self.logs = [*self._recent(), log]

    def _recent(self) -> list[BatchLog]:
        """The logs still noting, and the newest finished ones up to `MAX_NOTED` batches in all."""
        kept: list[BatchLog] = []
        finished = 0
        for log in reversed(self.logs):
            if log.done:
                finished += len(log) + len(log.taken)
                if finished > MAX_NOTED:
                    continue
            kept.append(log)
        return kept[::-1]

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
        for log in self.logs:
            log.forget()
        self.logs = [log for log in self.logs if not log.done]
