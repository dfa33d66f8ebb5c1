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

When the loss of a step is the first non-finite one, `inputs_of` reads that batch's samples
again from the loader's dataset (`dataset[i]` for its indices: no per-step cost, and once
per run) and says which rows and columns hold NaN/Inf, so that TRN001 can name the data as
the cause. The re-read runs with the random generators' states saved and restored (a
random transform must not change the rest of the run) and within `REREAD_BUDGET_S`.

At every check all losses so far have been read, so no earlier batch can be the
culprit: `forget` drops what was noted. A loader that yields for long without
any check (an evaluation pass with no optimizer step) is trimmed to its last
`MAX_NOTED` batches as it goes, and so are the finished epochs kept between two
checks (a process that only evaluates has no check at all).
"""

from __future__ import annotations

import contextlib
import itertools
import random
import sys
import time
import weakref
from collections import deque
from collections.abc import Iterator
from typing import Any

import torch
from trainmedic.rules.trn.trn001_nonfinite_loss import BatchInputs, NonfiniteField

MAX_NOTED = 4096  # batches noted per loader between two checks: a NaN is read at most `every` steps late
LOG_ATTR = "_tm_batches"  # where a DataLoader iterator keeps its log
# Reading a batch again (a NaN loss's, once per run) stops after this long or this many
# samples: a dataset that decodes images from disk still answers within seconds.
REREAD_BUDGET_S = 2.0
REREAD_MAX_ROWS = 1024
_DEPTH = 4  # nesting of tuples, lists and dicts searched in a sample


class BatchLog(list[int]):
    """The step of every batch one loader iterator yielded since the last check (a plain list,
    appended by the loader's `__next__` hook), and the index lists it drew (`drawn`, a tee)."""

    __slots__ = ("at_start", "dataset", "drawn", "end", "iterator", "lead", "taken")

    def __init__(self, iterator: Any, drawn: Any) -> None:
        super().__init__()
        self.iterator = weakref.ref(iterator)
        self.dataset: Any = getattr(iterator, "_dataset", None)  # what the indices index
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

    def _drawn(self, step: int) -> Iterator[tuple[BatchLog, list[int]]]:
        """Each batch that step `step` trained on, with the log of its loader (integer indices only)."""
        for log in self.logs:
            for noted, index in log.pair():
                if noted == step and type(index) is list and index and isinstance(index[0], int):
                    yield log, index

    def of_step(self, step: int) -> list[int]:
        """The dataset indices of the batches that step `step` trained on (integers only)."""
        return [i for _, index in self._drawn(step) for i in index]

    def inputs_of(self, step: int) -> BatchInputs | None:
        """What the samples of step `step`'s batches hold, read again from their datasets:
        the rows and columns with NaN/Inf. None when they cannot be read again (no loader
        with a map-style dataset, a dataset that fails or runs out of time)."""
        batches = [(log.dataset, index) for log, index in self._drawn(step) if log.dataset is not None]
        if not batches:
            return None
        try:
            with _generators_kept(), torch.no_grad():
                return _read_again(batches)
        except Exception:  # a dataset that cannot be read again: the finding goes without it
            return None

    def forget(self) -> None:
        """A check read every loss so far: no batch noted up to now is a culprit."""
        for log in self.logs:
            log.forget()
        self.logs = [log for log in self.logs if not log.done]


def _read_again(batches: list[tuple[Any, list[int]]]) -> BatchInputs | None:
    deadline = time.perf_counter() + REREAD_BUDGET_S
    fields: dict[str, tuple[list[int], set[int], set[str]]] = {}
    positions: list[int] = []
    read = 0
    offset = 0
    for dataset, index in batches:
        for position, row in enumerate(index, start=offset):
            if read >= REREAD_MAX_ROWS or time.perf_counter() > deadline:
                return (
                    None if read == 0 else _inputs(fields, positions, read, sum(len(i) for _, i in batches))
                )
            read += 1
            bad = False
            for name, leaf in _leaves(dataset[row], "sample", _DEPTH):
                found = _nonfinite(leaf)
                if found is None:
                    continue
                columns, values = found
                rows, cols, kinds = fields.setdefault(name, ([], set(), set()))
                rows.append(row)
                cols.update(columns)
                kinds.update(values)
                bad = True
            if bad:
                positions.append(position)
        offset += len(index)
    return _inputs(fields, positions, read, offset)


def _inputs(
    fields: dict[str, tuple[list[int], set[int], set[str]]], positions: list[int], read: int, total: int
) -> BatchInputs:
    order = ("nan", "+inf", "-inf")
    return BatchInputs(
        rows_read=read,
        rows_in_batch=total,
        fields=tuple(
            NonfiniteField(
                field=name,
                rows=tuple(rows),
                columns=tuple(sorted(columns)),
                values=tuple(v for v in order if v in values),
            )
            for name, (rows, columns, values) in fields.items()
        ),
        positions=tuple(positions),
    )


def _leaves(sample: Any, name: str, depth: int) -> Iterator[tuple[str, Any]]:
    """The values of a sample that can hold NaN/Inf, each with where it sits in the sample."""
    if isinstance(sample, (tuple, list)) and depth > 0 and not _is_numbers(sample):
        for i, part in enumerate(sample):
            yield from _leaves(part, f"{name}[{i}]", depth - 1)
    elif isinstance(sample, dict) and depth > 0:
        for key, part in sample.items():
            yield from _leaves(part, f"{name}[{key!r}]", depth - 1)
    else:
        yield name, sample


def _is_numbers(values: Any) -> bool:
    """A flat list of numbers is one feature row (a `[1.0, nan, 3.0]` sample), not its parts."""
    return bool(values) and all(isinstance(v, (int, float)) for v in values)


def _nonfinite(value: Any) -> tuple[list[int], set[str]] | None:
    """(the columns, the kinds) of NaN/Inf in one part of a sample; None when it is finite
    or holds no floating-point numbers. Columns are the last axis of a 1-D or 2-D part."""
    if isinstance(value, torch.Tensor):
        tensor = value.detach()
    elif isinstance(value, (float, list)) or hasattr(value, "__array__"):
        try:
            tensor = torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError):  # strings, objects: nothing numeric to judge
            return None
    else:
        return None
    if not (tensor.is_floating_point() or tensor.is_complex()) or tensor.is_sparse:
        return None
    tensor = tensor.cpu()
    if tensor.is_complex():
        tensor = torch.view_as_real(tensor).sum(-1)  # non-finite when either part is
    bad = ~torch.isfinite(tensor)
    if not bool(bad.any()):
        return None
    values = {
        kind
        for kind, mask in (
            ("nan", torch.isnan(tensor)),
            ("+inf", torch.isposinf(tensor)),
            ("-inf", torch.isneginf(tensor)),
        )
        if bool(mask.any())
    }
    columns: list[int] = []
    if tensor.dim() in (1, 2):
        columns = torch.nonzero(bad.reshape(-1, tensor.shape[-1]).any(dim=0)).flatten().tolist()
    return columns, values


@contextlib.contextmanager
def _generators_kept() -> Iterator[None]:
    """A dataset's random transforms draw from the global generators: give them back as they were."""
    python = random.getstate()
    numpy = sys.modules.get("numpy")
    numpy_state = numpy.random.get_state() if numpy is not None else None
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        random.setstate(python)
        if numpy is not None:
            numpy.random.set_state(numpy_state)
