"""TOR017 for Accelerate: `Accelerator.load_state(folder)` is a resume.

`save_state` writes what the Accelerator knows of: the prepared models (`model.safetensors`),
optimizers (`optimizer.bin`), schedulers (`scheduler.bin`), the GradScaler (`scaler.pt`), the
random generators (`random_states_<rank>.pkl`: Python's, NumPy's, torch's, CUDA's) and the
objects given to `register_for_checkpointing` (`custom_checkpoint_<i>.pkl`). `load_state` loads
them back. What it does not know of is neither saved nor restored: an LR scheduler that was not
passed to `prepare` nor registered starts its schedule again while the optimizer goes on from
its saved step. And `load_state` does not move the data: a loop that resumes within an epoch
must train that epoch from `accelerator.skip_first_batches(dataloader, k)`, or it trains the
epoch's first batches again.

`install` (called when `accelerate.accelerator` is imported) wraps `load_state`: before the load
it starts `_resumes`' watch, so that the restores the load makes (optimizer, schedulers, scaler,
generators) are counted as any other; after it, the watch takes what the folder held and what
the first prepared optimizer holds now (its moments, learning rate and step are the saved
ones). At the first optimizer step, `_resumes` compares, with the prepared loaders marked as
drawing one batch ahead (`DataLoaderShard` pulls the next batch before it yields one).

Cost: a look at the folder's file names and the optimizer's state, once per `load_state`.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from trainmedic.rules.tor import tor017_resume_state_lost as tor017
from trainmedic.torch import _patches, _resumes
from trainmedic.torch._safety import contained

#: The files of a `save_state` folder, by the part of the state each holds.
PART_FILES = {
    tor017.OPTIMIZER: "optimizer*.bin",
    tor017.SCHEDULER: "scheduler*.bin",
    tor017.SCALER: "scaler.pt",
    tor017.RNG: "random_states_*.pkl",
}
#: The generators whose states `save_state` writes on every machine (CUDA's where there is one).
SAVED_GENERATORS = ["torch", "numpy", "python"]


def install(module: ModuleType) -> None:
    """Wrap `Accelerator.load_state` of `accelerate.accelerator` (once)."""
    cls = getattr(module, "Accelerator", None)
    original = getattr(cls, "load_state", None)
    if cls is None or original is None or getattr(original, "_trainmedic", False):
        return
    cls.load_state = _wrap(original)


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def load_state(self: Any, input_dir: Any = None, *args: Any, **kwargs: Any) -> Any:
        monitor = _patches.active()
        if monitor is None or monitor.broken:
            return original(self, input_dir, *args, **kwargs)
        where = _resumes.user_line(sys._getframe(1))
        contained(monitor, "accelerate load_state", _begin, self, where)
        result = original(self, input_dir, *args, **kwargs)
        contained(monitor, "accelerate load_state", _loaded, self, input_dir)
        return result

    load_state._trainmedic = True  # type: ignore[attr-defined]
    return load_state


def _begin(accelerator: Any, where: str) -> None:
    """Watch from before the load, so that its restores are counted."""
    draw_ahead = {id(loader.batch_sampler) for loader in accelerator._dataloaders}
    placeholder = _resumes.Saved(checkpoint="", framework="accelerate", models={}, parts={})
    _resumes.watch(placeholder, where, _patches.active, draw_ahead)


def _loaded(accelerator: Any, input_dir: Any) -> None:
    optimizers = [getattr(o, "optimizer", o) for o in accelerator._optimizers]
    if not optimizers or input_dir is None:
        # nothing to compare with, or a folder picked by automatic naming (not followed)
        _resumes.restored_from(None)
        return
    folder = Path(input_dir)
    parts = {part: any(folder.glob(pattern)) for part, pattern in PART_FILES.items()}
    rng = SAVED_GENERATORS if parts[tor017.RNG] else []
    _resumes.restored_from(_resumes.read_folder(folder.name, "accelerate", optimizers[0], parts, rng))
