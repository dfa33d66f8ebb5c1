"""A plain state dict and a Lightning checkpoint, reloaded in the training process as a user
loads them, against the module at the save (the save checks, `_saves`; TOR015).

A file written with `torch.save(model.state_dict(), path)` is loaded by its user into a new
instance of the model's class: `model.load_state_dict(torch.load(path, weights_only=True))`,
strict. A Lightning checkpoint by the module's own loader, `Module.load_from_checkpoint(path)`,
which builds the module from the hyperparameters the checkpoint recorded. Both need the
script's class, which a separate process cannot import when the script defines it (`__main__`):
so the reload runs here, with the probe of its held copy when the training has ended
(`_save_hold`), or on the probes' thread for a copy that is not held (`_save_copy.start`, after
the save call has returned), never in a training step, with the guard's load wrappers told to let it pass
(`_aside`). The reference is the module as it was saved, copied in the save call
(`_save_copy.freeze`); the probe is a few rows of the batch it was last seen with
(`_save_inputs`), so a module never seen in a checked forward gets the key check only.

- State dict (`prepare`, kind "state_dict"): the module the dict came from is found among the
  modules the guard knows (`owner`: the dict's tensors are that module's, or, for a converted
  copy such as `.half()`, its names and shapes are); the module a user instantiates is under
  its wrappers (DistributedDataParallel's `module`, torch.compile's `_orig_mod`), so a dict
  saved from the wrapper carries their prefix. The file is loaded with `strict=True` into a
  second copy of that module: keys it does not accept are found with the renaming that would
  load them (`_loads.best_renaming`); then the copy's outputs on the probe against the module's.
  The second copy keeps the module's non-persistent buffers (a new instance's come from its
  `__init__`, which this check does not run).
- Lightning (kind "lightning"), for a module whose `forward` is its own and that was seen in a
  checked forward: `type(module).load_from_checkpoint(path, map_location="cpu")`, once per
  checkpoint path, which runs the module's `__init__` with the recorded hyperparameters; under
  Lightning's `_EmptyInit` (what `Trainer.init_module(empty_init=True)` uses), so that the
  `torch.nn.init` functions do not draw from the run's random state. A module whose `__init__`
  takes an argument that `save_hyperparameters()` did not record does not build: the error and
  the arguments missing are given. Modules without a forward of their own keep the comparison
  of the checkpoint's tensors with the module's (`_save_worker.state_differences`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any

import torch
from torch import nn
from trainmedic.instrument.save_scratch import error_line
from trainmedic.torch import _save_copy as save_copy
from trainmedic.torch import _save_inputs as save_inputs
from trainmedic.torch._aside import working_aside
from trainmedic.torch._loads import best_renaming
from trainmedic.torch._save_probe import distance
from trainmedic.torch._save_worker import MAX_NAMES, fingerprint, output_of

KINDS = ("state_dict", "lightning")
_WRAPPERS = {"DistributedDataParallel": "module", "DataParallel": "module", "OptimizedModule": "_orig_mod"}
_built: set[str] = set()  # the checkpoints a module was built from (`load_from_checkpoint`), once each


def owner(roots: list[nn.Module], state: Mapping[Any, Any], max_bytes: int) -> nn.Module | None:
    """The module `state` was taken from, among `roots` and their submodules: the one whose
    parameters and buffers are the dict's tensors under its names (a `state_dict()`, or a
    subset of one), or, for a converted copy (`.half()`), a root (or the module under its
    wrappers) with the same names and shapes. None: none of them, not on the CPU, or its
    parameters above `max_bytes` (two more copies of it here: the file is read back only)."""
    tensors = [(str(k), v) for k, v in state.items() if isinstance(v, torch.Tensor)]
    if not tensors:
        return None
    found = next((m for m in (_sharing(root, tensors) for root in roots) if m is not None), None)
    if found is None:
        shapes = {key: tuple(value.shape) for key, value in tensors}
        candidates = (m for root in roots for m in (root, unwrapped(root)))
        found = next((m for m in candidates if _same_shapes(m, shapes)), None)
    if found is None:
        return None
    first = next(chain(found.parameters(), found.buffers()), None)
    if first is None or first.device.type != "cpu":
        return None
    size = sum(p.numel() * p.element_size() for p in found.parameters())
    return found if size <= max_bytes else None


def _sharing(root: nn.Module, tensors: list[tuple[str, Any]]) -> nn.Module | None:
    """The submodule of `root` whose tensors the dict holds under its own names (its keys are
    the root's names less one prefix, the submodule's path)."""
    names: dict[int, list[str]] = {}
    for name, tensor in chain(
        root.named_parameters(remove_duplicate=False), root.named_buffers(remove_duplicate=False)
    ):
        if type(tensor) in (torch.Tensor, nn.Parameter) and tensor.numel():
            names.setdefault(tensor.data_ptr(), []).append(name)
    prefixes: set[str] = set()
    for key, value in tensors:
        if type(value) is torch.Tensor and value.numel():
            held = names.get(value.data_ptr(), ())
            prefixes.update(n[: len(n) - len(key)] for n in held if n == key or n.endswith("." + key))
    if len(prefixes) != 1:
        return None
    prefix = prefixes.pop().rstrip(".")
    return root.get_submodule(prefix) if prefix else root


def _same_shapes(module: nn.Module, shapes: dict[str, tuple[int, ...]]) -> bool:
    held = module.state_dict(keep_vars=True)
    return len(held) == len(shapes) and all(
        isinstance(v, torch.Tensor) and shapes.get(k) == tuple(v.shape) for k, v in held.items()
    )


def unwrapped(module: nn.Module) -> nn.Module:
    """The module under DistributedDataParallel / DataParallel (`module`) and torch.compile
    (`_orig_mod`): the one a user builds anew and loads the file into."""
    for _ in range(4):
        attribute = _WRAPPERS.get(type(module).__name__)
        inner = getattr(module, attribute, None) if attribute else None
        if not isinstance(inner, nn.Module):
            break
        module = inner
    return module


@dataclass
class Reload:
    """A save to reload here: the module's copy at the save and the probe's rows."""

    kind: str
    path: str
    copied: Any
    rows: save_inputs.Rows | None

    def check(self, copied: Any, spec: dict[str, Any]) -> dict[str, Any]:
        """On the probes' thread: the reload and its measures, into `spec` (never raises: a
        failure of the check leaves the file's read-back)."""
        try:
            if self.kind == "lightning":
                _lightning(copied, self.path, self.rows, spec)
            else:
                _state_dict(copied, self.path, self.rows, spec)
        except Exception as exc:  # the check's own failure: the files are still read back
            spec.pop("reloaded", None)
            spec["check_error"] = error_line(exc)
        return spec


def prepare(kind: str, model: nn.Module, path: str) -> Reload | None:
    """In the save call: the module copied (`_save_copy.freeze`) and the probe's rows, or None
    when it is not reloaded here (a Lightning module without a forward of its own or never seen
    in a checked forward, a checkpoint it was built from already, a module on an accelerator)."""
    if kind == "lightning":
        import lightning.pytorch as pl

        if type(model).forward is pl.LightningModule.forward or path in _built:
            return None
        rows = save_inputs.rows_for(model, text=False)
        if rows is None:
            return None
        _built.add(path)
    else:
        model = unwrapped(model)
        rows = save_inputs.rows_for(model, text=_is_text(model))
    copied = save_copy.freeze(model)
    return None if copied is None else Reload(kind, path, copied, rows)


def _is_text(model: Any) -> bool:
    return isinstance(getattr(getattr(model, "config", None), "vocab_size", None), int)


def _state_dict(copied: Any, path: str, rows: save_inputs.Rows | None, spec: dict[str, Any]) -> None:
    name = type(copied).__name__
    spec["loader"] = f"torch.load(path, weights_only=True) and {name}.load_state_dict(strict=True)"
    with working_aside():
        loaded = torch.load(path, map_location="cpu", weights_only=True)
        fresh = save_copy.freeze(copied)
        try:
            fresh.load_state_dict(loaded, strict=True)
        except RuntimeError as exc:
            # "Error(s) in loading state_dict for MLP:", then a line per problem (keys, shapes)
            lines = [line.strip().rstrip(":") for line in str(exc).strip().splitlines()]
            error = f"{type(exc).__name__}: {'; '.join(lines[:2])}"[:400]
            spec["reloaded"] = {"reload_error": error, **_keys(fresh, loaded)}
            return
    _compare(copied, fresh, rows, spec)


def _keys(model: nn.Module, loaded: Mapping[Any, Any]) -> dict[str, Any]:
    """The file's keys against the module's: those missing, those unexpected, and the prefix
    stripped or added that maps the most of them (DDP's `module.`, torch.compile's `_orig_mod.`)."""
    ours = list(model.state_dict().keys())
    theirs = [str(k) for k in loaded]
    missing = [k for k in ours if k not in set(theirs)]
    unexpected = [k for k in theirs if k not in set(ours)]
    renaming = best_renaming(missing, unexpected)
    return {
        "model_tensors": len(ours),
        "state_dict_keys": len(theirs),
        "missing": len(missing),
        "unexpected": len(unexpected),
        "missing_examples": missing[:MAX_NAMES],
        "unexpected_examples": unexpected[:MAX_NAMES],
        "strip": renaming.strip,
        "add": renaming.add,
        "prefix_matches": renaming.matches,
    }


def _lightning(copied: Any, path: str, rows: save_inputs.Rows | None, spec: dict[str, Any]) -> None:
    """The checkpoint's tensors fingerprinted against the module's at the save (as a module
    without a forward is), then the module rebuilt with `load_from_checkpoint` and probed."""
    spec["fingerprints"] = {
        k: fingerprint(v) for k, v in copied.state_dict().items() if isinstance(v, torch.Tensor)
    }
    cls = type(copied)
    spec["loader"] = f"{cls.__name__}.load_from_checkpoint(path)"
    from lightning.fabric.utilities.init import _EmptyInit

    try:
        with working_aside(), _EmptyInit():
            reloaded = cls.load_from_checkpoint(path, map_location="cpu")
    except Exception as exc:
        spec["reloaded"] = {"reload_error": error_line(exc), "missing_arguments": missing_arguments(exc)}
        return
    _compare(copied, reloaded, rows, spec)


_MISSING = re.compile(r"missing \d+ required (?:positional|keyword-only) arguments?: (.*)")


def missing_arguments(exc: BaseException) -> list[str]:
    """The arguments a TypeError says `__init__` missed
    (`missing 1 required positional argument: 'hidden'`)."""
    found = _MISSING.search(str(exc)) if isinstance(exc, TypeError) else None
    return re.findall(r"'(\w+)'", found.group(1)) if found else []


def _compare(reference: Any, reloaded: Any, rows: save_inputs.Rows | None, spec: dict[str, Any]) -> None:
    """The reloaded module's outputs on the probe against the module's at the save."""
    if rows is None:
        return
    try:
        expected, got = _outputs(reference, rows), _outputs(reloaded, rows)
    except Exception:  # the rows do not fit this module's forward: the keys were checked
        return
    if expected is None or got is None:
        return
    first = next(reference.parameters(), None)
    spec["dtype"] = str(first.dtype if first is not None else torch.float32).removeprefix("torch.")
    spec["probe"] = rows.description
    spec["reloaded"] = distance(got, expected)


def _outputs(model: Any, rows: save_inputs.Rows) -> Any:
    """`model`'s main output on the rows, in eval mode under no_grad (`model` is a copy or the
    reloaded module: its flags are its own)."""
    model.eval()
    with torch.no_grad():
        return output_of(model(*rows.args, **rows.kwargs))
