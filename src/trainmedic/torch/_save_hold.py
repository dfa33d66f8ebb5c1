"""The copies of saved models held until the training ends (the save checks, `_saves`).

A save's copy (`_save_copy.freeze`, or a Lightning module's state) is the reference its reload is
compared with. Probing it while training runs costs the training steps that follow the save:
the probe's forward shares the interpreter lock and the cores with them (measured with
`benchmarks/save_checks_cost.py`: the steps after a `save_pretrained` of tinylm took 1.3-2.5x
their bare time). So the copy is held, and probed when the training is not running: when the
checks finish (the guard's end, the script's exit).

Only the newest save of each path can be compared: a path saved again is overwritten on disk,
so its held copy is replaced by the new one (the older save goes unchecked: its file no longer
exists); a copy whose path the script removed (a Trainer's rotated checkpoint) is dropped at the
next save. The held copies together stay within `SHARE` of the memory the machine has available
at each hold; a copy beyond it is probed at once, as it would be without holding. A run killed
before its end (a signal, the OOM killer) loses the checks it held. In a notebook kernel
(which never exits between cells) nothing is held: the copies are probed at once.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

import torch

# The held copies are memory the training cannot use until it ends, and what it still
# allocates after a save (an evaluation's activations, data caches, a larger last batch) is not
# known at the save: a quarter of what is available keeps three quarters of that headroom.
SHARE = 0.25


@dataclass
class Held:
    """One save's copy and what runs on it when the training is over."""

    path: str
    copied: Any
    probe: Callable[[Any], None]
    nbytes: int
    job: Any  # the `_saves.Job` whose reference the probe writes


@dataclass
class Holds:
    """The held copies, one per saved path, in the order of their saves."""

    by_path: dict[str, Held] = field(default_factory=dict)

    def total(self) -> int:
        return sum(held.nbytes for held in self.by_path.values())

    def holding(self, path: str) -> bool:
        return path in self.by_path

    def hold(self, held: Held) -> tuple[bool, list[Held]]:
        """Whether `held` is held (else: probe it now, it does not fit), and the copies the
        caller drops unchecked: the path's earlier one (its file is overwritten), and those whose
        path the script removed since (a Trainer's rotated checkpoint), in either case."""
        dropped = [h for h in self.by_path.values() if h.path == held.path or not Path(h.path).exists()]
        for gone in dropped:
            del self.by_path[gone.path]
        if _in_notebook() or self.total() + held.nbytes > SHARE * _available():
            return False, dropped
        self.by_path[held.path] = held
        return True, dropped

    def probe_all(self, gone: Callable[[Any], None]) -> None:
        """The training is over: every held copy probed, oldest save first, and released; the
        job of a path the script removed since (a Trainer's rotated checkpoint) given to `gone`."""
        while self.by_path:
            held = self.by_path.pop(next(iter(self.by_path)))
            if not Path(held.path).exists():
                gone(held.job)
                continue
            with contextlib.suppress(Exception):  # a probe reports its own failures
                held.probe(held.copied)


def drop_unchecked(jobs: list[Any], path: str) -> bool:
    """Drop from `jobs` the saves of `path` handed over (`job.json` written) and not compared yet
    (no `result.json`): the file they would read back is being overwritten, and compared with
    the model of an earlier save it would differ by the steps between them. A worker reloading
    one meanwhile finishes it; its result is not read. True when one was dropped."""
    stale = [
        job
        for job in jobs
        if job.path == path
        and (job.scratch / "job.json").exists()
        and not (job.scratch / "result.json").exists()
    ]
    for job in stale:
        jobs.remove(job)
    return bool(stale)


def nbytes(copied: Any) -> int:
    """The bytes of a copy's tensors: a module's parameters and buffers, or a state dict's."""
    if isinstance(copied, torch.nn.Module):
        tensors: Any = chain(copied.parameters(), copied.buffers())
    else:
        tensors = (v for v in copied.values() if isinstance(v, torch.Tensor))
    return sum(t.numel() * t.element_size() for t in tensors)


def _available() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


def _in_notebook() -> bool:
    """A running IPython kernel: it runs until it is shut down, long after the cell that trained.
    Its app, not its module: a process that merely imported ipykernel (a library, a test session
    that started kernels elsewhere) exits as scripts do."""
    kernelapp = sys.modules.get("ipykernel.kernelapp")
    return kernelapp is not None and bool(kernelapp.IPKernelApp.initialized())
