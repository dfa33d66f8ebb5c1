"""A state dict saved with sharded tensors: FSDP2's DTensor shards written without gathering.

Under `fully_shard` (FSDP2) a module's `state_dict()`, and PEFT's `get_peft_model_state_dict`
on it, hold DTensors: each process's local shard of every parameter, with the whole
parameter's shape as metadata. `torch.save` of that dict on rank 0 writes rank 0's shards
only (a 1/world-size part of each parameter's values); the file does not load without
`torch.distributed` (`weights_only` refuses DTensors) and never holds the other ranks' parts.
The check runs in the save call, on the dict in memory, before anything is read back: it looks
at each value's type and shapes only (no data, no collective), so it costs a pass over the keys.
A DTensor whose local shape is its whole shape (replicated) holds every value and is not counted.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from trainmedic.rules.tor import tor015_saved_model_differs as tor015
from trainmedic.rules.tor import tor016_adapter_saved_empty as tor016

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

MAX_NAMES = 5


def sharded(state: Mapping[Any, Any]) -> dict[str, Any] | None:
    """The tensors of `state` that are shards (local shape other than the whole shape), with a
    few names and their local and whole shapes; None when there is none (or torch.distributed's
    DTensor was never imported: then there is none)."""
    module = sys.modules.get("torch.distributed.tensor")
    dtensor = getattr(module, "DTensor", None)
    if dtensor is None:
        return None
    names: list[str] = []
    shapes: dict[str, list[list[int]]] = {}
    for key, value in state.items():
        if isinstance(value, dtensor):
            local = list(value.to_local().shape)
            whole = list(value.shape)
            if local != whole:
                names.append(str(key))
                if len(shapes) < MAX_NAMES:
                    shapes[str(key)] = [local, whole]
    if not names:
        return None
    return {
        "total": len(state),
        "sharded": len(names),
        "sharded_examples": names[:MAX_NAMES],
        "shapes": shapes,
        "adapter": sum("lora_" in str(key) for key in state),
    }


def observe(
    monitor: MonitorLike, state: Mapping[Any, Any], target: Any, caller: FrameType, seen: set[str]
) -> None:
    """A state dict of shards, observed at its save, once per path in `seen`: an adapter's
    (most keys LoRA's, as `get_peft_model_state_dict` gives) for TOR016, a model's (a PEFT
    model's whole `state_dict()` included) for TOR015."""
    found = sharded(state)
    path = str(Path(os.fspath(target)).resolve())
    if found is None or path in seen:
        return
    seen.add(path)
    evidence = {
        "path": path,
        "where": f"{Path(caller.f_code.co_filename).name}:{caller.f_lineno}",
        "saved_at_step": monitor.step,
        **found,
    }
    if 2 * found["adapter"] > found["total"]:
        check, evidence = (
            tor016.OBSERVATION,
            {**evidence, "reason": tor016.SHARDED, "trained_steps": monitor.step},
        )
    else:
        check, evidence = tor015.RELOAD_OBSERVATION, {**evidence, "kind": tor015.SHARDED}
    monitor.observe(check, evidence, once=False, step=monitor.step or None)
