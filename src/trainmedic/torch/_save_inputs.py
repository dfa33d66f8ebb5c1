"""The run's own inputs, kept for the save checks' probe (`_saves`, `_save_probe`, `_save_reload`).

A probe made of the data the model trained on tells what a user of the saved model sees: a
head that reloads at random, or weights that overflowed, move the outputs on real rows as on
random ones, but only real rows exercise what training exercised (the token ids of its
vocabulary that occur, its attention masks, the range of its features). So the forward watch
(`_forward.ForwardWatch`, open on the steps it checks only) hands each outermost forward's
arguments here (`keep`): a reference to the batch, no copy and no read, replaced by the next
checked step's. At a save, `rows_for` copies the few rows the probe needs, in the save call,
before training goes on and may change the batch in place. A forward whose inputs need a
gradient (a loss module called on the model's outputs) is not kept: its graph would stay alive.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any

import torch

# Rows of a plain module's batch in its probe: several rows show more of the outputs than one,
# and 4 keep the forward on the copy a small share of a training step's.
PLAIN_ROWS = 4
# Tokens of a language model's row in its probe. The probe's forward may run beside training (a
# copy that is not held, `_save_hold`), and its cost grows with the length (attention's
# quadratically); 64 positions go through every layer as a longer row does, and a weight that did
# not come back moves the outputs at every one.
MAX_TOKENS = 64
# The inputs of a language model's probe that a reloaded model is called with (what `generate` and
# a served model receive); labels and the like are the training loss's.
TEXT_INPUTS = ("input_ids", "attention_mask")


@dataclass(frozen=True)
class Seen:
    """The arguments of a root module's forward on a checked step, by reference."""

    step: int
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]


@dataclass(frozen=True)
class Rows:
    """The probe's inputs, copied from a batch at a save: call the model with `*args, **kwargs`."""

    step: int
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    @property
    def description(self) -> str:
        values = chain(self.args, self.kwargs.values())
        first = next((v for v in values if isinstance(v, torch.Tensor) and v.dim()), None)
        rows = 1 if first is None else len(first)
        what = "a row" if rows == 1 else f"the first {rows} rows"
        return f"{what} of the run's batch at step {self.step}"


_latest: weakref.WeakKeyDictionary[Any, Seen] = weakref.WeakKeyDictionary()


def keep(module: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None, step: int) -> None:
    """The forward of `module` (outermost, grad enabled) on a checked step: its inputs kept."""
    for value in chain(args, (kwargs or {}).values()):
        if isinstance(value, torch.Tensor) and value.requires_grad:
            return
    with contextlib.suppress(TypeError):  # a module that is not hashable or weakly referenced
        _latest[module] = Seen(step, args, kwargs or {})


def forget() -> None:
    _latest.clear()


def seen_for(model: Any) -> Seen | None:
    """The last kept inputs of `model`, or of a wrapper that called it with its own inputs
    (DistributedDataParallel's `module`, torch.compile's `_orig_mod`, a PeftModel's base)."""
    found = _latest.get(model)
    if found is not None:
        return found
    for root, seen in list(_latest.items()):
        inner = root
        for _ in range(4):
            inner = _unwrapped(inner)
            if inner is None:
                break
            if inner is model:
                return seen
    return None


def _unwrapped(module: Any) -> Any:
    name = type(module).__name__
    if name in ("DistributedDataParallel", "DataParallel"):
        return getattr(module, "module", None)
    if name == "OptimizedModule":
        return getattr(module, "_orig_mod", None)
    get_base = getattr(module, "get_base_model", None)  # PEFT
    return get_base() if callable(get_base) else None


def rows_for(model: Any, *, text: bool) -> Rows | None:
    """The probe's inputs for `model`, copied from the last batch it was seen with (None: none
    seen). `text`: a language model's, its first row's `input_ids` and `attention_mask` from
    its first token (left padding skipped), `MAX_TOKENS` at most; else every tensor argument,
    its first `PLAIN_ROWS` rows (a tensor whose first dimension is not the batch's is kept
    whole), and the other arguments as they were."""
    seen = seen_for(model)
    if seen is None:
        return None
    if text:
        ids = seen.kwargs.get("input_ids")
        if ids is None and seen.args and isinstance(seen.args[0], torch.Tensor):
            ids = seen.args[0]
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.is_floating_point() or not ids.numel():
            return None
        mask = seen.kwargs.get("attention_mask")
        start = 0
        if isinstance(mask, torch.Tensor) and mask.shape == ids.shape:
            ones = mask[0].nonzero()
            start = int(ones[0, 0]) if len(ones) else 0
        kept = {"input_ids": ids[:1, start : start + MAX_TOKENS].detach().clone()}
        if isinstance(mask, torch.Tensor) and mask.shape == ids.shape:
            kept["attention_mask"] = mask[:1, start : start + MAX_TOKENS].detach().clone()
        return Rows(seen.step, (), kept)
    tensors = [v for v in chain(seen.args, seen.kwargs.values()) if isinstance(v, torch.Tensor) and v.dim()]
    if not tensors:
        return None
    batch = tensors[0].shape[0]

    def cut(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if value.dim() and value.shape[0] == batch:
                value = value[:PLAIN_ROWS]
            return value.detach().clone()
        return value

    return Rows(seen.step, tuple(cut(v) for v in seen.args), {k: cut(v) for k, v in seen.kwargs.items()})
