"""The model as it was at a save, probed off the training thread (the save checks, `_saves`).

The save checks compare a reloaded model with the model in memory *at the save*: the next
optimizer step changes the weights, so its reference outputs cannot simply be computed later.
Computing them in the save call makes the training loop wait for a forward pass (on tinylm,
longer than the save itself); a `fork()` of the process (a copy-on-write snapshot) makes it wait
for the fork, which in a process holding torch and a model copies the page tables of its many
mappings (measured here: 18-60 ms for a 400 MB process, again more than a small save).

So the save call only copies the model (`freeze`): each parameter and buffer cloned (one memory
copy of the weights, less than what the save itself copies and writes) and each module's own
attributes (its training flag, a PEFT layer's merged and active adapters) copied onto those
clones, without the deep copy of configs and other objects that training does not change. The
save returns at once, training goes on, and the reference is the model as it was saved whatever
the next steps do to it: the probe runs on the copy when the training has ended (`_save_hold`),
or, for a copy that is not held, in a thread of its own once the save call has returned
(`start`). The copy keeps the user's module hooks but not trainmedic's (they
would take the probe for a training batch), and its forward runs under `no_grad`, which
trainmedic's global forward hooks ignore (grad mode is per thread).

Only a model whose tensors are plain CPU tensors is copied (`freeze`): on an accelerator a
clone would double the model in device memory, and the probe's forward there costs the host a
few kernel launches against a save of seconds, so it runs in the save call; sharded or meta
tensors, and a module whose `forward` was replaced on the instance (offload hooks, a compiled
module), are probed there too.
"""

from __future__ import annotations

import copy
import os
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable
from itertools import chain
from typing import Any

import torch
from torch import nn


def freeze(model: Any) -> Any:
    """The model as it is now, in the save call, or None when it is not copied here: every
    parameter and buffer cloned (tied ones stay tied), every module copied with its own
    attributes as they are (flags, lists and dicts copied one level: a PEFT layer's
    `merged_adapters`, its active adapter), onto those clones. Configs and other objects are
    shared: training does not change them.

    Not copied: a tensor that is not a plain CPU tensor (on an accelerator, sharded, meta), or a
    module whose `forward` was replaced on the instance (accelerate's offload hooks, a compiled
    module): that forward would reach the live module, not the copy."""
    clones: dict[int, Any] = {}
    with torch.no_grad():
        for tensor in chain(model.parameters(), model.buffers()):
            if type(tensor) not in _PLAIN or tensor.device.type != "cpu":
                return None
            if id(tensor) not in clones:
                clone = tensor.detach().clone()
                if type(tensor) is nn.Parameter:
                    clone = nn.Parameter(clone, requires_grad=False)
                clones[id(tensor)] = clone
    try:
        return _copy_module(model, clones, {})
    except _NotCopied:
        return None


class _NotCopied(Exception):
    """A module whose `forward` was replaced on the instance: it is probed in the save call."""


def _copy_module(module: nn.Module, clones: dict[int, Any], done: dict[int, nn.Module]) -> nn.Module:
    if id(module) in done:  # a module shared by two parents stays shared
        return done[id(module)]
    cls = type(module)
    copied = cls.__new__(cls)
    done[id(module)] = copied
    state = vars(module).copy()
    if "forward" in state:
        raise _NotCopied
    for name in _TENSORS:
        if state[name]:
            state[name] = {k: None if t is None else clones[id(t)] for k, t in state[name].items()}
    if state["_modules"]:
        state["_modules"] = {
            k: None if m is None else _copy_module(m, clones, done) for k, m in state["_modules"].items()
        }
    for name in _HOOKS:
        hooks = state[name]
        # Never the live dict: a hook added to the live module later is not the copy's. An
        # empty one is shared by the copies (nothing registers a hook on them).
        state[name] = type(hooks)((k, h) for k, h in hooks.items() if not _ours(h)) if hooks else _NO_HOOKS
    for name in state.keys() - _INTERNALS:  # the subclass's own: PEFT's merged_adapters, scaling
        value = state[name]
        if type(value) in (dict, list, set):
            state[name] = value.copy()
        elif isinstance(value, (dict, list, set)):
            state[name] = copy.copy(value)
    vars(copied).update(state)
    return copied


_PLAIN = (torch.Tensor, nn.Parameter)
_NO_HOOKS: OrderedDict[int, Any] = OrderedDict()
_TENSORS = ("_parameters", "_buffers")
_INTERNALS = frozenset(vars(nn.Module()))  # every module's own bookkeeping
_HOOKS = tuple(
    name for name in _INTERNALS if name.endswith("hooks") and isinstance(getattr(nn.Module(), name), dict)
)


def _ours(hook: Any) -> bool:
    owner = getattr(hook, "func", hook)  # a functools.partial
    return str(getattr(owner, "__module__", "") or "").startswith("trainmedic.")


_queue: queue.SimpleQueue[tuple[Any, Callable[[Any], None], threading.Event, threading.Event]] = (
    queue.SimpleQueue()
)
_thread_pid = 0


def prepare() -> None:
    """Start the probes' thread, once per process, before any save needs it: starting a thread
    costs its starter ms (measured: 10 ms on a loaded machine), which no save call should pay."""
    global _thread_pid
    if _thread_pid != os.getpid():  # a forked child has no thread of its parent's
        _thread_pid = os.getpid()
        threading.Thread(target=_serve, name="trainmedic-save-probe", daemon=True).start()


def _serve() -> None:
    while True:
        copied, probe, go, done = _queue.get()
        try:
            go.wait()
            probe(copied)
        except Exception:  # `probe` reports its own failures; the thread serves the next save
            pass
        finally:
            done.set()


def start(copied: Any, probe: Callable[[Any], None], go: threading.Event) -> threading.Event:
    """Hand `probe(copied)` to the probes' thread, which runs it once `go` is set (when the save
    call has returned); the event returned is set when it is done.

    The thread waits for `go` before it asks for the interpreter lock, else the save call would
    wait for a switch of the lock (several ms). It keeps the process's priority: a lowered one
    would hold the interpreter lock while the system runs others, and the training thread
    would wait for it."""
    prepare()
    done = threading.Event()
    _queue.put((copied, probe, go, done))
    return done
