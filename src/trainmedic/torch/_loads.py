"""TOR015's measure: what `nn.Module.load_state_dict(..., strict=False)` left unloaded.

With `strict=False` PyTorch returns the model's keys it did not load (missing) and the state
dict's keys that matched nothing (unexpected), and raises nothing: a checkpoint saved from a DDP
model (`module.`) or a torch.compile'd one (`_orig_mod.`) loads nothing into the plain model, and
nothing says so. `install` wraps `nn.Module.load_state_dict` once; the wrapper calls the original
unchanged and, for a `strict=False` call that left keys on either side, measures here: the counts,
a few names, and the renaming of the state dict's keys (a leading prefix stripped, one added)
that would load the most of them. `trainmedic.rules.tor.tor015_saved_model_differs` judges it.

Cost: a load is rare and off the training step. A `strict=True` call (the default, which raises
on any mismatch) costs one argument check; a `strict=False` one with mismatched keys a few
passes over its keys (one per pair of candidate prefixes, at most `MAX_CANDIDATES` + 1 a side).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from itertools import islice
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from torch import nn
from trainmedic.rules.tor import tor015_saved_model_differs as tor015
from trainmedic.torch._aside import aside
from trainmedic.torch._safety import contained

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

Wrap = Callable[[Any, str, Callable[[Any], Any]], None]
Active = Callable[[], "MonitorLike | None"]

#: Prefixes a wrapper adds to every key of its state_dict(): DDP and DataParallel, torch.compile.
KNOWN_PREFIXES = ("module.", "_orig_mod.")
# Leading prefixes tried on each side besides the known ones: the most common first components
# (and first two) of the keys; a wrapper's or a parent module's prefix leads every key it names.
MAX_CANDIDATES = 4
MAX_EXAMPLES = 5
MAX_NESTED = 3
PEEK = 8  # values looked at to tell a nested state dict


class Renaming(NamedTuple):
    """Strip `strip` from the state dict's keys and add `add`: `matches` keys would then load."""

    strip: str
    add: str
    matches: int


def install(wrap: Wrap, active: Active) -> None:
    """Wrap `nn.Module.load_state_dict` with `wrap` (which records how to undo it)."""
    wrap(nn.Module, "load_state_dict", lambda original: _load_state_dict(original, active))


def _load_state_dict(original: Any, active: Active) -> Any:
    def load_state_dict(self: Any, state_dict: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, state_dict, *args, **kwargs)
        strict = args[0] if args else kwargs.get("strict", True)
        if strict or aside():  # strict raises on a mismatch; aside: the save checks' own reload
            return result
        monitor = active()
        if monitor is not None and not monitor.broken:
            contained(
                monitor, "load_state_dict", observe, monitor, self, state_dict, result, sys._getframe(1)
            )
        return result

    return load_state_dict


def observe(monitor: MonitorLike, model: Any, state_dict: Any, result: Any, caller: FrameType) -> None:
    """Measure one strict=False load; observe it when TOR015's judge says it failed."""
    missing = [str(k) for k in getattr(result, "missing_keys", ())]
    unexpected = [str(k) for k in getattr(result, "unexpected_keys", ())]
    if not missing and not unexpected:
        return
    keys = len(state_dict)
    # Every key of the model is either loaded (a key of the state dict that was not unexpected)
    # or missing: no call to model.state_dict(), whose hooks may gather (FSDP).
    model_tensors = len(missing) + max(0, keys - len(unexpected))
    renaming = best_renaming(missing, unexpected)
    counts = {
        "model_tensors": model_tensors,
        "state_dict_keys": keys,
        "missing": len(missing),
        "unexpected": len(unexpected),
        "prefix_matches": renaming.matches,
    }
    reason = tor015.judge(**counts, strip=renaming.strip, add=renaming.add)
    if reason is None:
        return
    evidence = {
        "reason": reason,
        "model": type(model).__name__,
        "where": f"{Path(caller.f_code.co_filename).name}:{caller.f_lineno}",
        **counts,
        "strip": renaming.strip,
        "add": renaming.add,
        "missing_examples": missing[:MAX_EXAMPLES],
        "unexpected_examples": unexpected[:MAX_EXAMPLES],
        "nested": nested(state_dict, unexpected),
    }
    monitor.observe(tor015.OBSERVATION, evidence, step=monitor.step or None)


def best_renaming(missing: list[str], unexpected: list[str]) -> Renaming:
    """The prefix to strip from the unexpected keys, and the one to add, that turn the most of
    them into missing keys (`Renaming("", "", 0)` when none does)."""
    best = Renaming("", "", 0)
    if not missing or not unexpected:
        return best
    targets = set(missing)
    for strip in candidates(unexpected):
        for add in candidates(missing):
            if strip == add:  # the same prefix on both sides renames nothing
                continue
            cut = len(strip)
            matches = sum(1 for k in unexpected if k.startswith(strip) and add + k[cut:] in targets)
            if matches > best.matches:
                best = Renaming(strip, add, matches)
    return best


def candidates(keys: Iterable[str]) -> list[str]:
    """ "" (no prefix), the known wrapper prefixes that lead some key, and the most common
    leading one- and two-component prefixes of the keys."""
    counts: Counter[str] = Counter()
    known: set[str] = set()
    for key in keys:
        parts = key.split(".")
        for depth in (1, 2):
            if len(parts) > depth:
                counts[".".join(parts[:depth]) + "."] += 1
        known.update(p for p in KNOWN_PREFIXES if key.startswith(p))
    common = [prefix for prefix, _ in counts.most_common(MAX_CANDIDATES)]
    return ["", *sorted(known), *(p for p in common if p not in known)]


def nested(state_dict: Any, unexpected: list[str]) -> list[str]:
    """Unexpected top-level entries that are state dicts themselves (a mapping of tensors): a
    whole checkpoint ({"model": ..., "optimizer": ..., "epoch": 3}, a Lightning checkpoint's
    "state_dict") passed where its model's entry was meant."""
    if not isinstance(state_dict, Mapping):
        return []
    found = [k for k in unexpected if "." not in k and _holds_tensors(state_dict.get(k))]
    return found[:MAX_NESTED]


def _holds_tensors(value: Any) -> bool:
    """A mapping whose first few values include a tensor (a state dict, not a loop's counters)."""
    return isinstance(value, Mapping) and any(
        isinstance(v, torch.Tensor) for v in islice(value.values(), PEEK)
    )
