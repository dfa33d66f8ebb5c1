"""TOR017's random generators: which states a checkpoint holds, and which a resume restores.

A checkpoint that holds the generators' states was saved so that the run goes on with the
interrupted one's numbers (dropout masks, augmentations, a DataLoader's shuffle drawn from the
global generator). They are recognised by what they are, not by their keys, whatever the recipe
calls them (`rng_state`, `cpu_rng_state`, `torch_rng_state`, HF's `rng_state.pth` with `python`,
`numpy`, `cpu`, `cuda`, Accelerate's `random_states_0.pkl`):

- torch's CPU generator: `torch.get_rng_state()`, a uint8 tensor of the Mersenne Twister's
  5056 bytes;
- CUDA's: `torch.cuda.get_rng_state()` or `get_rng_state_all()`, uint8 tensors (a list of them)
  under a key that names CUDA (their 16 bytes alone say nothing);
- NumPy's global generator: `numpy.random.get_state()`, `("MT19937", keys, pos, ...)`, or the
  dict of `get_state(legacy=False)`;
- Python's: `random.getstate()`, `(3, <625 ints>, None)`.

The values looked at are a checkpoint's top-level ones and the first few of each mapping among
them (one level: `checkpoint["rng_state"]["numpy"]`). A restore is a call of the matching setter
(`torch.set_rng_state`, `torch.cuda.set_rng_state(_all)`, `numpy.random.set_state`,
`random.setstate`) between the resume and the first optimizer step: `install` wraps them, and
each call only adds a name to a set while a resume is being watched.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from itertools import islice
from typing import Any

import torch

#: The generators, in the order they are named.
KINDS = ("torch", "cuda", "numpy", "python")
CPU_STATE_BYTES = 5056  # torch.get_rng_state().numel(): the CPU generator's MT19937 state
PYTHON_STATE_WORDS = 625  # random.getstate()[1]: 624 words of MT19937 state and its position
PEEK = 8  # values of a nested mapping looked at

Wrap = Callable[[Any, str, Callable[[Any], Any]], None]


def kinds_in(checkpoint: Mapping[str, Any]) -> list[str]:
    """The generators whose states `checkpoint` holds, in `KINDS` order."""
    found: set[str] = set()
    for key, value in checkpoint.items():
        _recognise(key, value, found)
        if isinstance(value, Mapping):
            for inner_key, inner in islice(value.items(), PEEK):
                _recognise(f"{key}.{inner_key}", inner, found)
    return [kind for kind in KINDS if kind in found]


def _recognise(key: Any, value: Any, found: set[str]) -> None:
    if _is_bytes(value) and value.numel() == CPU_STATE_BYTES:
        found.add("torch")
    elif "cuda" in str(key).lower() and (
        _is_bytes(value) or (isinstance(value, (list, tuple)) and value and all(map(_is_bytes, value)))
    ):
        found.add("cuda")
    elif _is_numpy_state(value):
        found.add("numpy")
    elif (
        isinstance(value, tuple)
        and len(value) == 3
        and value[0] == 3
        and isinstance(value[1], tuple)
        and len(value[1]) == PYTHON_STATE_WORDS
    ):
        found.add("python")


def _is_bytes(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype == torch.uint8 and value.dim() == 1


def _is_numpy_state(value: Any) -> bool:
    if isinstance(value, Mapping):
        return value.get("bit_generator") == "MT19937"
    return (
        isinstance(value, (tuple, list))
        and len(value) >= 3
        and isinstance(value[0], str)
        and value[0] == "MT19937"
    )


def install(wrap: Wrap, restored: Callable[[str], None]) -> None:
    """Wrap the setters that restore a generator's state: each call reports its kind."""
    setters: list[tuple[Any, str, str]] = [
        (torch, "set_rng_state", "torch"),
        (torch.random, "set_rng_state", "torch"),
        (torch.cuda, "set_rng_state", "cuda"),
        (torch.cuda, "set_rng_state_all", "cuda"),
        (random, "setstate", "python"),
    ]
    try:
        import numpy

        setters.append((numpy.random, "set_state", "numpy"))
    except ImportError:  # pragma: no cover - numpy is a dependency of trainmedic itself
        pass
    for owner, name, kind in setters:
        if name in vars(owner):
            wrap(owner, name, _setter(kind, restored))


def _setter(kind: str, restored: Callable[[str], None]) -> Callable[[Any], Any]:
    def make(original: Any) -> Any:
        def set_state(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            restored(kind)
            return result

        return set_state

    return make
