"""The process-wide hooks that feed a `Monitor`, installed once and removable.

PyTorch has global hooks for optimizer steps and module forwards; for the rest
(autograd backward, optimizer construction, DataLoader iteration,
DistributedSampler, LR schedulers, `torch.load` and the `load_state_dict` of modules,
optimizers, schedulers and scalers) the original function is
wrapped and always called unchanged. Every wrapper
does nothing but count, time and keep the loss on an ordinary step (no host
sync and one tensor op: the loss's value read on the CPU, a `detach()` alias
elsewhere, `_reads.kept`), and never touches a
random generator, a tensor's value or the order of batches: the watched run
computes exactly what it computes bare.
"""

from __future__ import annotations

import contextlib
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

from torch.optim import lr_scheduler
from torch.optim import optimizer as _optimizer
from torch.optim.optimizer import (
    Optimizer,
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)
from torch.utils.data import DistributedSampler
from torch.utils.data.dataloader import _BaseDataLoaderIter

import torch
from trainmedic.torch import _clipping, _loads, _resumes, _saves
from trainmedic.torch import _save_inputs as save_inputs
from trainmedic.torch._batches import LOG_ATTR, MAX_NOTED
from trainmedic.torch._losses import MAX_KEPT_LOSSES
from trainmedic.torch._reads import kept
from trainmedic.torch._safety import turn_off

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

_clock = time.perf_counter
_Tensor = torch.Tensor  # bound once: the backward wrapper's type checks skip a module lookup
_COMPILE_WARNING = r"Using `torch\.compile\(module\)` when there are global hooks on modules"
_active: MonitorLike | None = None
# PyTorch's own functions that rewrite `.grad` in place without zeroing it.
_GRAD_RESCALERS = (
    (torch.nn.utils, "clip_grad_norm_"),
    (torch.nn.utils, "clip_grad_value_"),
)
_UNCOUNTED = "_tm_uncounted"  # on a scheduler whose steps leave its _step_count at 0
_undo: list[Callable[[], None]] = []
_step_hooks: list[Any] = []  # the handles of the active monitor's optimizer step hooks


def active() -> MonitorLike | None:
    """The monitor the hooks feed in this process (None when not installed)."""
    return _active


def install(monitor: MonitorLike) -> None:
    """Route every hook to `monitor` (installing the hooks on first use)."""
    global _active
    _active = monitor
    _route_step_hooks(monitor)
    if _undo:
        return
    _undo.append(lambda: _route_step_hooks(None))
    _silence_compile_warning()
    _wrap(torch.autograd, "backward", _backward)
    _wrap(Optimizer, "__init__", _optimizer_init)
    for owner, name in _GRAD_RESCALERS:
        _wrap(owner, name, _rescales_grads)
    _wrap(torch.amp.GradScaler, "unscale_", _unscale)
    _wrap(_BaseDataLoaderIter, "__next__", _loader_next)
    _wrap(_BaseDataLoaderIter, "__init__", _loader_start)
    _wrap(_BaseDataLoaderIter, "_reset", _loader_start)
    _wrap(DistributedSampler, "__iter__", _sampler_iter)
    for cls in vars(lr_scheduler).values():
        if isinstance(cls, type) and issubclass(cls, lr_scheduler.LRScheduler) and "step" in vars(cls):
            _wrap(cls, "step", _scheduler_step)
    _clipping.install(_wrap, active)
    # TOR015 names the caller of `load_state_dict` by its frame: its wrapper goes outermost.
    _resumes.install(_wrap, active)
    _loads.install(_wrap, active)
    _saves.install(_wrap, active, paused)


def _route_step_hooks(monitor: MonitorLike | None) -> None:
    """PyTorch calls the monitor's own step methods: one Python call per hook and step, where a
    trampoline that looked up the active monitor would add a second (`paused` unroutes them).
    The pre-step hook is the monitor's to switch off and on (`PreStepHook`)."""
    while _step_hooks:
        _step_hooks.pop().remove()
    if monitor is not None:
        pre = PreStepHook(monitor.on_step_pre)
        _step_hooks.append(pre)
        _step_hooks.append(register_optimizer_step_post_hook(monitor.on_step_post))
        monitor.pre_step, monitor.pre_step_on = pre.switch, True


class PreStepHook:
    """The monitor's optimizer pre-step hook, which it switches off for the steps that need
    nothing before their update (`Monitor.on_step_post` says which: most steps of a run), so that
    PyTorch calls no Python before them; the post-step hook, which counts every step, stays.

    Off and on are a deletion from and an insertion into PyTorch's dict of global pre-step hooks,
    under the hook's own handle id, in its place among the others: no handle made per switch.
    Once removed, it stays off.
    """

    def __init__(self, hook: Callable[[Any, Any, Any], Any]) -> None:
        self.hook = hook
        self.handle = register_optimizer_step_pre_hook(hook)
        self.on, self.removed = True, False

    def switch(self, on: bool) -> None:
        if on is self.on or self.removed:
            return
        if on:
            hooks = _optimizer._global_optimizer_pre_hooks
            hooks[self.handle.id] = self.hook
            # Back in its place: the hooks registered after it (ids grow) go after it again. A
            # one-off hook that removes itself while PyTorch iterates this OrderedDict (the
            # resume check's) must stay the last entry, or the iteration raises.
            for later in [key for key in hooks if key > self.handle.id]:
                hooks[later] = hooks.pop(later)
        else:
            self.handle.remove()
        self.on = on

    def remove(self) -> None:
        self.removed = True
        self.handle.remove()


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Hooks stay installed but feed nothing (trainmedic's own training, e.g. the overfit test).

    A forward watch open on the monitor (at the start of every run, and on the step before a
    watched check) is closed for the while: its global module hooks would see trainmedic's own
    forward passes as the run's, and send every one of them down PyTorch's slow path. It opens
    again, afresh, when the pause ends.
    """
    global _active
    saved, _active = _active, None
    _route_step_hooks(None)
    watch = saved.forward if saved is not None and saved.forward.is_open else None
    if watch is not None:
        watch.close(None)
    try:
        yield
    finally:
        _active = saved
        if _undo:
            _route_step_hooks(saved)
            if watch is not None:
                watch.open()


def uninstall() -> None:
    """Restore every patched function and remove the global hooks."""
    global _active
    _active = None
    while _undo:
        _undo.pop()()
    save_inputs.forget()  # the last batch kept for a save's probe


def _silence_compile_warning() -> None:
    """torch.compile warns whenever global forward hooks exist: ours are trainmedic's, not the user's."""
    warnings.filterwarnings("ignore", message=_COMPILE_WARNING, category=UserWarning)
    entry = warnings.filters[0]

    def restore() -> None:
        with contextlib.suppress(ValueError):
            cast(list[Any], warnings.filters).remove(entry)
            warnings._filters_mutated()  # type: ignore[attr-defined]

    _undo.append(restore)


def _wrap(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
    original = vars(owner)[name]
    wrapper = make(original)
    wrapper.__wrapped__ = original
    for attr in ("__name__", "__qualname__", "__doc__"):
        if hasattr(original, attr):
            setattr(wrapper, attr, getattr(original, attr))
    setattr(owner, name, wrapper)
    _undo.append(lambda: setattr(owner, name, original))


def _backward(original: Any) -> Any:
    # `torch.autograd.backward(tensors, grad_tensors, retain_graph, create_graph, grad_variables,
    # inputs)`: `Tensor.backward` passes the first four positionally and `inputs=` by name, on
    # nearly every step. Named here, all five are bound by the call itself, and the ordinary step
    # calls the original with the same five: no `*args`/`**kwargs` unpacked into the call (a
    # tuple and a dict built and merged on every step, and `inputs` compared with the named
    # parameters one by one: about 2,400 of the wrapper's instructions under callgrind). Anything
    # else passed (a sixth positional argument, another keyword) takes `_backward_slow`, unchanged.
    def backward(
        tensors: Any,
        grad_tensors: Any = None,
        retain_graph: Any = None,
        create_graph: Any = False,
        *args: Any,
        inputs: Any = None,
        **kwargs: Any,
    ) -> Any:
        monitor = _active
        if (
            not (args or kwargs)
            and monitor is not None
            and monitor.plain_backward
            and not monitor.broken
            and not (retain_graph or create_graph)
            and isinstance(tensors, _Tensor)
            and tensors.numel() == 1
            and len(losses := monitor.losses) < MAX_KEPT_LOSSES
        ):
            # An ordinary training step: keep the loss's value, all in this one call (see
            # `Monitor.on_backward` and `_reads.kept` for what is kept, and why).
            losses.append(kept(tensors))
            monitor.loss_steps.append(monitor.step + 1)
            return original(tensors, grad_tensors, retain_graph, create_graph, inputs=inputs)
        if inputs is not None:  # passed by name (a sixth positional argument is in `args`)
            kwargs["inputs"] = inputs
        return _backward_slow(
            original, monitor, (tensors, grad_tensors, retain_graph, create_graph, *args), kwargs
        )

    return backward


def _backward_slow(
    original: Any, monitor: MonitorLike | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """A backward that is not an ordinary step's, called with what its caller passed: the
    monitor's full hooks around the original, or the original alone (no monitor, or a broken one)."""
    if monitor is None or monitor.broken:
        return original(*args, **kwargs)
    tensors, keeps = args[0], args[2] or args[3]  # retain_graph or create_graph
    try:
        monitor.on_backward(tensors, bool(keeps))
    except Exception as exc:
        turn_off(monitor, "on_backward", exc)
    result = original(*args, **kwargs)
    if not monitor.broken:
        try:
            monitor.after_backward(tensors)
        except Exception as exc:
            turn_off(monitor, "after_backward", exc)
    return result


def _rescales_grads(original: Any) -> Any:
    """Clipping and unscaling write `.grad` in place: the zeroing watch must not take it for zeroing."""

    def rescale(*args: Any, **kwargs: Any) -> Any:
        monitor = _active
        if monitor is None or monitor.broken or monitor.plain_backward:  # plain: no watch armed
            return original(*args, **kwargs)
        monitor.before_rescale()
        result = original(*args, **kwargs)
        monitor.after_rescale()
        return result

    return rescale


def _unscale(original: Any) -> Any:
    """`GradScaler.unscale_`, once an iteration under a scaler: rescales `.grad` in place, as
    clipping does, and is counted: an iteration whose optimizer did not step was skipped
    (`_scaler`). One integer added and compared; the scaler is read every `every` calls."""

    def unscale_(self: Any, optimizer: Any) -> Any:
        monitor = _active
        if monitor is None or monitor.broken:
            return original(self, optimizer)
        plain = monitor.plain_backward
        if not plain:
            monitor.before_rescale()
        result = original(self, optimizer)
        if not plain:
            monitor.after_rescale()
        watch = monitor.scaler
        watch.unscales += 1
        if watch.unscales >= watch.read_at or watch.probe:
            watch.after_unscale(self, optimizer)
        return result

    return unscale_


def _optimizer_init(original: Any) -> Any:
    """Every optimizer made is known before it steps: its parameters' backward is not a step."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        monitor = _active
        if monitor is not None:
            monitor.optimizers_made.add(self)

    return __init__


def _loader_next(original: Any) -> Any:
    """Time the wait for each batch and note the step it belongs to: one Python call a batch."""

    def __next__(self: Any) -> Any:
        monitor = _active
        if monitor is None or monitor.broken:
            return original(self)
        start = _clock()
        try:
            data = original(self)
        except StopIteration:
            monitor.on_loader_exhausted(self)
            raise
        monitor.data_wait += _clock() - start
        noted = self.__dict__.get(LOG_ATTR)
        if noted is not None:
            noted.append(monitor.step + 1)
            if len(noted) >= MAX_NOTED:
                noted.forget(keep=MAX_NOTED // 2)
        return data

    return __next__


def _loader_start(original: Any) -> Any:
    """A DataLoader iterator starts an epoch (made, or reset with persistent workers)."""

    def start(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        monitor = _active
        if monitor is not None and not monitor.broken:
            try:
                monitor.on_loader_start(self)
            except Exception as exc:
                turn_off(monitor, "on_loader_start", exc)

    return start


def _sampler_iter(original: Any) -> Any:
    def __iter__(self: Any) -> Any:
        if _active is not None:
            _active.on_sampler_iter(self)
        return original(self)

    return __iter__


def _scheduler_step(original: Any) -> Any:
    def step(self: Any, *args: Any, **kwargs: Any) -> Any:
        count = getattr(self, "_step_count", None)
        # A scheduler's initial step (its constructor's, or SequentialLR's for its first part)
        # runs with _step_count set to 0: it is not the user's. CosineAnnealingWarmRestarts
        # never counts its steps: its count stays 0 after its initial step, and every later
        # step is the user's.
        users = count is None or count >= 1 or _UNCOUNTED in vars(self)
        if _active is not None and users:
            _active.on_scheduler_step(self)
        # PyTorch's first user step warns about the order of steps: it names the user's line.
        # (Its warning about an `epoch` argument, on any step, is left naming this module:
        # caught on every such step, a "default" filter would show it every time.)
        if count == 1:
            return _warnings_at_caller(original, self, *args, **kwargs)
        result = original(self, *args, **kwargs)
        if count == 0 and getattr(self, "_step_count", None) == 0:
            vars(self)[_UNCOUNTED] = True
        return result

    return step


def _warnings_at_caller(original: Any, *args: Any, **kwargs: Any) -> Any:
    """Call `original` for a wrapper, so that its warnings name the wrapper's caller as they would bare.

    PyTorch warns with `stacklevel=2` to name the line that called it, the one the user can fix;
    under a wrapper that line is in this module. The warnings are caught and raised again once the
    call is over, under the user's own filters: those that name this module, at the line of the
    wrapper's caller (call this from the wrapper itself), registered there as `warnings.warn` does.
    Catching costs a filter change per call: only for calls that can warn, never every step.
    """
    here, caller = sys._getframe().f_code.co_filename, sys._getframe(2)
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            return original(*args, **kwargs)
    finally:
        for w in caught:
            if w.filename == here:
                names = caller.f_globals
                warnings.warn_explicit(
                    w.message,
                    w.category,
                    caller.f_code.co_filename,
                    caller.f_lineno,
                    names.get("__name__", "<string>"),
                    names.setdefault("__warningregistry__", {}),
                    names,
                    source=w.source,
                )
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
