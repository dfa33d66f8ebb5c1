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

A loop that draws ahead (Accelerate's and Lightning's loaders, a CUDA prefetcher: one
batch pulled before the one in hand is given to the loop) notes each batch with the step
before the one that trains it: the epoch's first step pulls one batch more than the steps
after it. That surplus is the lead: measured at the first check that has seen two steps of
the epoch, it shifts the pairing (the first `lead` notes are dropped, and the end of the
epoch notes the step of the last batch).

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

    __slots__ = ("at_start", "drawn", "end", "iterator", "lead", "taken")

    def __init__(self, iterator: Any, drawn: Any) -> None:
        super().__init__()
        self.iterator = weakref.ref(iterator)
        self.drawn: Any = drawn  # the tee branch the loader does not read; None once settled
        self.taken: list[tuple[int, Any]] = []  # (step, indices) already paired
        self.lead: int | None = None  # batches the loop draws ahead (None: not known yet)
        self.at_start = True  # nothing noted was dropped yet: the epoch's first step is in the log
        self.end = 0  # the latest step noted before the notes were dropped, or the epoch ended at

    def find_lead(self) -> None:
        """How many batches the epoch's first step pulled beyond the steady count a step, once a
        second step's pulls are complete (a third step was noted); its surplus notes go."""
        if self.lead is not None:
            return
        if not self.at_start:
            self.lead = 0
            return
        runs = [len(list(group)) for _, group in itertools.groupby(self)]
        if len(runs) < 3:
            return  # not known yet: the caller keeps the notes
        self.lead = max(0, runs[0] - runs[1])
        del self[: self.lead]

    def latest(self) -> int:
        """The step of the last batch it yielded, or of the pull that found its epoch over (0: none)."""
        return max(self[-1] if self else 0, self.end)

    @property
    def done(self) -> bool:
        """Its epoch ended, or its iterator is gone: nothing more will be noted in it."""
        return self.drawn is None or self.iterator() is None

    def pair(self) -> list[tuple[int, Any]]:
        """Pair the noted steps with the index lists drawn for them (in C up to here)."""
        self.find_lead()
        if self:
            indices = itertools.islice(self.drawn, len(self)) if self.drawn is not None else ()
            self.taken.extend(zip(self, indices, strict=False))  # a loader cut short drew fewer
            self.clear()
            self.at_start = False
        return self.taken

    def settle(self, step: int) -> None:
        """The iterator's epoch ended at the pull for step `step`: keep what it yielded, release
        the sampler's iterator. A loop that draws ahead trains its last batches from here on."""
        self.find_lead()
        self.end = max(self.end, step)
        if self.lead and self.drawn is not None:
            self.extend(range(step, step + self.lead))
        self.pair()
        del self.taken[:-MAX_NOTED]
        self.drawn = None

    def forget(self, keep: int = 0) -> None:
        """Drop the pairs (and buffered index lists) of all but the last `keep` noted batches
        (all are kept while the lead is not known, up to `MAX_NOTED`)."""
        self.taken.clear()
        self.end = self.latest()
        self.find_lead()
        if self.lead is None:
            if len(self) < MAX_NOTED:
                return
            self.lead = 0  # an evaluation pass: one step for all its batches, nothing to shift
        drop = len(self) - keep
        if drop > 0:
            self.at_start = False
            if self.drawn is not None:
                deque(itertools.islice(self.drawn, drop), maxlen=0)  # advance the buffer, in C
            del self[:drop]


class LoaderBatches:
    """The logs of the loader iterators the monitor sees, and the lookup a NaN loss makes."""

    def __init__(self) -> None:
        self.logs: list[BatchLog] = []

    def start(self, iterator: Any) -> None:
        """An iterator starts an epoch: tee its sampler iterator (before any index is drawn)."""
        old = iterator.__dict__.get(LOG_ATTR)
        if old is not None:  # persistent workers: the same iterator, a new epoch
            old.settle(old[-1] + 1 if old else 0)
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
    def ended(iterator: Any, step: int) -> None:
        """`iterator` ran out at the pull for step `step`."""
        log = iterator.__dict__.get(LOG_ATTR)
        if log is not None:
            log.settle(step)

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
