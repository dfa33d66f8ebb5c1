"""JAX / Flax / optax under `trainmedic run`, with no code change: the guard on every optax
transformation and Flax optimizer, and the loss where JAX programs write it.

Called by the post-import hooks (`instrument/bootstrap.py`) when the script imports each module:

- `optax`: every public builder of the `optax` namespace annotated to return a transformation
  (`optax.adam`, `sgd`, `chain`, `masked`, `multi_transform`, `inject_hyperparams`, ...) returns
  it behind the guard, because a raw loop (`tx.update(grads, opt_state, params)` inside `jit`,
  then `optax.apply_updates`) has no other place every step goes through: there is no trainer,
  and `apply_updates` sees no gradients and carries no state to count steps with. A builder
  given transformations first takes their guards off (`bare`), so `optax.chain(clip, adam)` holds
  one guard, around the outermost, and the inner states keep the shape the script expects; a
  factory handed to `inject_hyperparams` has its result taken bare too (the factory is called at
  each trace: a guard inside would be a new one each time). `optax.MultiSteps` gets its guard at
  construction (it is a class, its `update` a method). `optax.contrib`'s builders likewise.
  optax's own modules call each other through `optax._src`, which stays unwrapped.
- `flax.training.train_state`: `TrainState.create(..., tx=...)` builds its state with
  `trainmedic.jax.guard(tx)` in place of `tx`, so every `state.apply_gradients(grads=...)`
  (inside `jit` or not) runs the guard's device-side checks, and the sampled steps and the
  first non-finite gradient (TRN007, at its step) reach the run (a `tx` optax's builders
  guarded already keeps that guard). One place covers every Linen loop: `apply_gradients`
  calls `state.tx.update`, whatever optax chain the script built (`optax.MultiSteps`,
  `inject_hyperparams` included: the guard wraps the outermost transformation and leaves its
  updates unchanged).
- `flax.nnx.training.optimizer`: `nnx.Optimizer(model, tx, wrt=...)` likewise; its
  `update(model, grads, value=loss)` passes `value=` on, which adds the loss check (TRN001).
- `flax.metrics.tensorboard`, `clu.metric_writers`, `tensorboardX`: each scalar written
  (`scalar`, `write_scalars`, `add_scalar`) is also a `Metric` event, so the loss the script
  reports is the run's curve (TRN002 divergence, TRN003 not learning). tensorboardX is read only
  in a process that has imported JAX: PyTorch scripts that use it are the torch guard's.

The guard talks to the host only on a non-finite step or every `TRAINMEDIC_JAX_EVERY`-th step
(default: the guard's 100), so a healthy step adds a few reductions and no host sync.
`TRAINMEDIC_JAX=0` turns all of this off (the printed metric lines are still read by the
supervisor). The guard's state wraps the optimizer's (`GuardState(inner, step)`): a checkpoint
of the `opt_state` (or `TrainState`) written under `run` holds it, so restore it under `run` too, or set
`TRAINMEDIC_JAX=0` to read or write checkpoints shared with unsupervised runs.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
import threading
from collections import OrderedDict
from types import ModuleType
from typing import Any

from trainmedic.events import Metric
from trainmedic.instrument import channel

_ENV_OFF = "TRAINMEDIC_JAX"
_ENV_EVERY = "TRAINMEDIC_JAX_EVERY"
_MARK = "_trainmedic"
_SEEN = 4096  # (name, step, value) points remembered, to send a point once through nested writers


def enabled() -> bool:
    return os.environ.get(_ENV_OFF, "1") != "0"


def _every() -> int:
    value = os.environ.get(_ENV_EVERY, "")
    return int(value) if value.isdigit() and int(value) > 0 else 100


def guarded(tx: Any) -> Any:
    """`tx` behind the guard, once (a script that guards its own optimizer keeps its guard)."""
    import trainmedic.jax as tj

    if tx is None or tj.is_guarded(tx):
        return tx
    return tj.guard(tx, every=_every())


def install_train_state(module: ModuleType) -> None:
    """Flax Linen: `TrainState.create` guards the `tx` it is given."""
    if not enabled():
        return
    cls = module.TrainState
    original = cls.__dict__["create"].__func__
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def create(klass: type, *args: Any, **kwargs: Any) -> Any:
        if "tx" in kwargs:
            kwargs["tx"] = guarded(kwargs["tx"])
        return original(klass, *args, **kwargs)

    setattr(create, _MARK, True)
    cls.create = classmethod(create)


def install_nnx_optimizer(module: ModuleType) -> None:
    """Flax NNX: `nnx.Optimizer(model, tx, ...)` guards its `tx`."""
    if not enabled():
        return
    cls = module.Optimizer
    original = cls.__init__
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def init(self: Any, model: Any, tx: Any = None, *args: Any, **kwargs: Any) -> None:
        if "tx" in kwargs:
            kwargs["tx"] = guarded(kwargs["tx"])
            original(self, model, *args, **kwargs)
        else:
            original(self, model, guarded(tx), *args, **kwargs)

    setattr(init, _MARK, True)
    cls.__init__ = init


class _Scalars:
    """Sends each scalar a writer is given as a `Metric` event, once."""

    def __init__(self) -> None:
        self._seen: OrderedDict[tuple[str, int | None, str], None] = OrderedDict()
        self._lock = threading.Lock()

    def send(self, name: Any, value: Any, step: Any) -> None:
        try:
            number = float(value)
            at = int(step) if step is not None else None
        except (TypeError, ValueError):
            return  # not a scalar (a writer given a string or an array): not a curve point
        key = (str(name), at, repr(number))
        with self._lock:
            if key in self._seen:  # a MultiWriter hands the same point to each of its writers
                return
            self._seen[key] = None
            if len(self._seen) > _SEEN:
                self._seen.popitem(last=False)
        channel.emit(Metric(name=str(name), value=number, step=at))


_scalars = _Scalars()


def _after(cls: type, method: str, read: Any) -> None:
    """Make `cls.method` hand its arguments to `read` (never failing the write) before it runs."""
    original = cls.__dict__.get(method)
    if original is None or getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with contextlib.suppress(Exception):
            read(*args, **kwargs)
        return original(self, *args, **kwargs)

    setattr(wrapper, _MARK, True)
    setattr(cls, method, wrapper)


def install_flax_tensorboard(module: ModuleType) -> None:
    """`flax.metrics.tensorboard.SummaryWriter.scalar(tag, value, step)`."""
    if enabled():
        _after(
            module.SummaryWriter, "scalar", lambda tag, value, step, *_, **__: _scalars.send(tag, value, step)
        )


def _clu_scalars(step: Any, scalars: Any, *_: Any, **__: Any) -> None:
    for name, value in dict(scalars).items():
        _scalars.send(name, value, step)


def install_clu(module: ModuleType) -> None:
    """`write_scalars(step, scalars)` of every CLU writer the package defines."""
    if not enabled():
        return
    base = module.MetricWriter
    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, base) and value is not base:
            _after(value, "write_scalars", _clu_scalars)


def _tbx_scalar(tag: Any, scalar_value: Any = None, global_step: Any = None, *_: Any, **__: Any) -> None:
    if "jax" in sys.modules:
        _scalars.send(tag, scalar_value, global_step)


def install_tensorboardx(module: ModuleType) -> None:
    """`tensorboardX.SummaryWriter.add_scalar(tag, value, step)`, in a process that runs JAX."""
    if enabled():
        _after(module.SummaryWriter, "add_scalar", _tbx_scalar)


# -- raw optax: every transformation the script builds through the `optax` namespace ------------

_NOT_BUILT = frozenset({"with_extra_args_support"})  # the guard's own tool: never a guard itself
_FACTORIES = frozenset({"inject_hyperparams", "inject_stateful_hyperparams"})
_AUTO = "_trainmedic_auto"  # on an automatic guard's update function: the transformation it wraps


def _auto_guard(tx: Any) -> Any:
    """`tx` behind the guard, remembering `tx` so that a combinator can take it back bare."""
    wrapped = guarded(tx)
    if wrapped is not tx:
        setattr(wrapped.update, _AUTO, tx)
    return wrapped


def bare(value: Any) -> Any:
    """What the script passed, with the automatic guards taken off again (a guard the script
    wrote itself with `trainmedic.jax.guard` stays): in containers, one level of functions."""
    inner = getattr(getattr(value, "update", None), _AUTO, None)
    if inner is not None:
        return inner
    if callable(value) and getattr(value, _MARK, False):
        return value.__wrapped__  # an `optax` builder handed over as a factory
    kind = type(value)
    if kind in (list, tuple):
        items = [bare(item) for item in value]
        return kind(items) if any(a is not b for a, b in zip(items, value, strict=True)) else value
    if kind is dict:
        pairs = {key: bare(item) for key, item in value.items()}
        return pairs if any(pairs[key] is not value[key] for key in value) else value
    return value


def _bare_result(factory: Any) -> Any:
    """A script's own factory handed to `inject_hyperparams`: its transformation, bare (the guard
    goes around the injected transformation, once, not inside it at every trace)."""
    if getattr(factory, _MARK, False) or not callable(factory):
        return bare(factory)

    @functools.wraps(factory)
    def build(*args: Any, **kwargs: Any) -> Any:
        return bare(factory(*args, **kwargs))

    return build


def _building(function: Any, *, factory: bool = False) -> Any:
    """`function` (an optax builder) returning its transformation behind the guard, built from
    the bare transformations it is given, so that `optax.chain(clip, optax.adam(...))` holds one
    guard, the outermost."""
    import optax

    @functools.wraps(function)
    def build(*args: Any, **kwargs: Any) -> Any:
        args = tuple(bare(a) for a in args)
        kwargs = {key: bare(value) for key, value in kwargs.items()}
        if factory and args:
            args = (_bare_result(args[0]), *args[1:])
        elif factory and "inner_factory" in kwargs:
            kwargs["inner_factory"] = _bare_result(kwargs["inner_factory"])
        result = function(*args, **kwargs)
        if isinstance(result, optax.GradientTransformation):
            return _auto_guard(result)
        if callable(result):  # `inject_hyperparams(optax.adam)`: a builder in turn
            return _building(result)
        return result

    setattr(build, _MARK, True)
    return build


def _builds_transformation(function: Any) -> bool:
    """Whether an optax function is annotated to return a transformation (or a builder of one)."""
    returns = inspect.get_annotations(function).get("return")
    return "GradientTransformation" in (returns if isinstance(returns, str) else repr(returns))


def install_optax(module: ModuleType) -> None:
    """Raw optax: each public builder (`optax.adam`, `chain`, `inject_hyperparams`, ...) returns
    its transformation behind the guard, and `optax.MultiSteps` is guarded around its steps, so a
    loop that calls `tx.update(grads, opt_state, params)` inside `jit` runs the guard's checks with
    no Flax in sight. Flax's `TrainState.create` and `nnx.Optimizer` keep that guard (`guarded`)."""
    if not enabled():
        return
    for namespace in (module, getattr(module, "contrib", None)):  # contrib: muon, schedule_free, ...
        if namespace is not None:
            _install_builders(namespace)
    _install_multi_steps(module.MultiSteps)


def _install_builders(namespace: ModuleType) -> None:
    for name, value in list(vars(namespace).items()):
        if (
            name.startswith("_")
            or name in _NOT_BUILT
            or not inspect.isfunction(value)
            or getattr(value, _MARK, False)
            or not _builds_transformation(value)
        ):
            continue
        setattr(namespace, name, _building(value, factory=name in _FACTORIES))


def _install_multi_steps(cls: type) -> None:
    """`optax.MultiSteps(opt, k)`: the guard around the accumulating steps (each call of its
    `update` is a step, as under `TrainState`), with `opt` bare inside."""
    import optax

    original = cls.__dict__["__init__"]
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *(bare(a) for a in args), **{key: bare(v) for key, v in kwargs.items()})
        with contextlib.suppress(Exception):  # unguarded rather than broken
            guard = _auto_guard(optax.GradientTransformationExtraArgs(self.init, self.update))
            self.init, self.update = guard.init, guard.update

    setattr(init, _MARK, True)
    cls.__init__ = init  # type: ignore[misc]
