"""TOR017's measure for the Hugging Face Trainer: weights from a checkpoint folder, a new start.

`Trainer.train(resume_from_checkpoint=...)` restores the weights, `optimizer.pt`,
`scheduler.pt`, `scaler.pt`, the RNG states (`rng_state.pth`) and `trainer_state.json`, whose
global step also makes it skip the batches already trained on. A script that instead loads the
model with `from_pretrained("out/checkpoint-500")` and calls `train()` starts from global step 0:
a new warm-up, empty optimizer moments, fresh random generators, and, when the checkpoint was
saved within an epoch (a fractional `epoch`), that epoch's first batches trained again. `check_start` runs at
`on_train_begin` (`trainmedic.hf.Guard`), when the Trainer has already restored whatever it
restores: a model loaded from a `checkpoint-N` folder of the run's own `output_dir`, with the
Trainer at step 0, is such a restart. `trainmedic.rules.tor.tor017_resume_state_lost` judges it.

Cost: at the start of training, a look at the model's source folder and, when it is a
Trainer checkpoint of this run, one read of its `trainer_state.json`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainmedic.rules.tor import tor017_resume_state_lost as tor017

STATE_FILE = "trainer_state.json"
#: The files of a Trainer checkpoint folder, by the part of the state each holds.
PART_FILES = {
    tor017.OPTIMIZER: ("optimizer.pt",),
    tor017.SCHEDULER: ("scheduler.pt",),
    tor017.SCALER: ("scaler.pt",),
    tor017.RNG: ("rng_state.pth",),
}


def check_start(model: Any, args: Any, state: Any, kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The evidence of a Trainer that starts at step 0 from its own checkpoint's weights (or None)."""
    folder = _source_folder(model)
    if folder is None or not (folder / STATE_FILE).is_file() or state.global_step:
        return None
    output_dir = getattr(args, "output_dir", None)
    same_run = output_dir is not None and folder.parent.resolve() == Path(output_dir).resolve()
    saved_state = json.loads((folder / STATE_FILE).read_text())
    saved = {part: _has(folder, names) for part, names in PART_FILES.items()}
    # A fractional epoch is a save within an epoch: a Trainer restarted at step 0 trains the
    # epoch's first batches again (resume_from_checkpoint skips them).
    epoch = saved_state.get("epoch")
    saved[tor017.DATA] = isinstance(epoch, (int, float)) and epoch != int(epoch)
    saved_step = int(saved_state.get("global_step") or 0)
    lost = tor017.judge(
        saved=saved,
        loaded=dict.fromkeys(saved, False),
        same_parameters=same_run,
        saved_step=saved_step,
        resumed_step=int(state.global_step or 0),
    )
    if not lost:
        return None
    last = _last_logged(saved_state)
    return {
        "framework": "transformers",
        "checkpoint": str(folder),
        "where": "Trainer.train() without resume_from_checkpoint",
        "lost": lost,
        "saved_lr": last.get("learning_rate"),
        "resumed_lr": _current_lr(kwargs),
        "saved_step": saved_step,
        "resumed_step": int(state.global_step or 0),
        "saved_counters": {"epoch": saved_state.get("epoch")},
        "saved_loss": last.get("loss"),
    }


def _source_folder(model: Any) -> Path | None:
    """The local folder `from_pretrained` loaded the model from (None for a Hub name or no model)."""
    config = getattr(model, "config", None)
    name = getattr(model, "name_or_path", None) or getattr(config, "_name_or_path", None)
    if not name:
        return None
    folder = Path(str(name))
    return folder if folder.is_dir() else None


def _has(folder: Path, names: tuple[str, ...]) -> bool:
    return any((folder / name).is_file() or any(folder.glob(name.replace(".", "_*.", 1))) for name in names)


def _last_logged(saved_state: Mapping[str, Any]) -> dict[str, Any]:
    """The last training log entry of the checkpoint's history (loss, learning_rate)."""
    history = saved_state.get("log_history") or []
    logged = [entry for entry in history if isinstance(entry, Mapping) and "loss" in entry]
    return dict(logged[-1]) if logged else {}


def _current_lr(kwargs: Mapping[str, Any]) -> float | None:
    scheduler = kwargs.get("lr_scheduler")
    if scheduler is not None and hasattr(scheduler, "get_last_lr"):
        return float(scheduler.get_last_lr()[0])
    optimizer = kwargs.get("optimizer")
    groups = getattr(optimizer, "param_groups", None)
    return float(groups[0]["lr"]) if groups else None
