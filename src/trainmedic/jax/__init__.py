"""JAX / Flax / optax: `guard(tx)` checks every step inside `jit`, and talks to the host rarely.

    import trainmedic.jax
    tx = trainmedic.jax.guard(optax.adam(1e-3))        # any optax transformation
    state = tx.init(params)
    updates, state = tx.update(grads, state, params, value=loss)   # `value=` adds the loss check

Every step, on the device: is the loss finite, are the gradients and updates
finite (one global norm each). Only when the answer is "no", or on every
`every`-th step, does a host callback run, inside a `lax.cond`: healthy steps
cost a few reductions and no device-to-host transfer (torchtitan checks
finiteness the same way). The callback is a `jax.pure_callback`, whose result
feeds the step counter: unlike `jax.debug.callback` it adds no effect token,
which would make every jitted step dispatch synchronously. The host side emits
TRN001 (non-finite loss) and TRN007 (non-finite or exploding gradient norm) once
each, and the sampled steps as `Step` events (loss, grad_norm) so `trainmedic run`
sees the curve; the decisions and their words are TRN001's and TRN007's files
(`judge_jax`). Flax's `TrainState.apply_gradients` calls `tx.update` the same way.
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
from typing import Any, NamedTuple

from trainmedic.errors import install_hint

try:
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"trainmedic.jax needs JAX and optax: {install_hint('jax optax', 'jax')}") from exc

from trainmedic.events import FindingRaised, Step
from trainmedic.findings import Finding
from trainmedic.instrument import channel
from trainmedic.rules.trn import trn001_nonfinite_loss as trn001
from trainmedic.rules.trn import trn007_exploding_gradients as trn007

__all__ = ["GuardState", "findings", "guard", "is_guarded"]

# optax >= 0.2.5 names it optax.tree.norm; older releases (still common) only have global_norm
_tree_norm = getattr(getattr(optax, "tree", None), "norm", None) or optax.global_norm
EXPLODE_FACTOR = trn007.JAX_EXPLODE_FACTOR  # x the median of earlier sampled norms: an explosion
_I32 = jax.ShapeDtypeStruct((), jnp.int32)  # type: ignore[no-untyped-call]


class GuardState(NamedTuple):
    """The wrapped optimizer's state and the step counter the guard samples by.

    An attribute it lacks is looked up on the wrapped state, so code written for the bare
    optimizer's state still reads it: `opt_state.hyperparams` of `optax.inject_hyperparams`,
    `opt_state.mini_step` of `optax.MultiSteps`.
    """

    inner: Any
    step: jax.Array

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy/pickle probe dunders: never the wrapped state's
            raise AttributeError(name)
        return getattr(self.inner, name)


def guard(
    tx: Any, *, every: int = 100, explode_factor: float = EXPLODE_FACTOR, echo: bool | None = None
) -> Any:
    """Wrap an optax transformation: same updates, plus finiteness checks (TRN001/TRN007)."""
    if every < 1:
        raise ValueError(f"every must be a positive integer, got {every!r}")
    # under `trainmedic run` optax's builders guard what they build: this guard replaces that one
    auto = getattr(getattr(tx, "update", None), "_trainmedic_auto", None)
    inner = optax.with_extra_args_support(tx if auto is None else auto)
    monitor = _Monitor(explode_factor, echo=(not channel.is_supervised()) if echo is None else echo)

    def init_fn(params: Any) -> GuardState:
        return GuardState(inner=inner.init(params), step=jnp.zeros([], jnp.int32))

    def update_fn(
        updates: Any, state: GuardState, params: Any = None, **extra_args: Any
    ) -> tuple[Any, GuardState]:
        new_updates, inner_state = inner.update(updates, state.inner, params, **extra_args)
        grad_norm = _tree_norm(updates)  # non-finite iff some gradient is (or it overflows)
        update_norm = _tree_norm(new_updates)
        value = extra_args.get("value")
        loss = (
            jnp.asarray(value, jnp.float32).reshape(()) if value is not None else jnp.zeros([], jnp.float32)
        )
        healthy = jnp.isfinite(grad_norm) & jnp.isfinite(update_norm) & jnp.isfinite(loss)
        report = (~healthy) | (state.step % every == 0)
        has_loss = jnp.asarray(value is not None)  # static: known when the step is traced

        def to_host() -> jax.Array:
            # pure_callback, not debug.callback: it carries no effect token, so jit keeps dispatching
            # steps asynchronously (a debug callback, even in an untaken branch, costs ~4x on small steps).
            # Its result feeds the step counter so XLA cannot drop it.
            result: jax.Array = jax.pure_callback(
                monitor.observe, _I32, state.step, loss, grad_norm, update_norm, has_loss
            )
            return result

        zero = jnp.zeros([], jnp.int32)
        nudge = jax.lax.cond(report, to_host, lambda: zero)
        return new_updates, GuardState(inner=inner_state, step=state.step + 1 + nudge)

    update_fn._trainmedic_guard = True  # type: ignore[attr-defined]  # `is_guarded` tells it
    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def is_guarded(tx: Any) -> bool:
    """Whether `tx` is already a guard (so that `trainmedic run` does not wrap it twice)."""
    return bool(getattr(getattr(tx, "update", None), "_trainmedic_guard", False))


_raised: list[Finding] = []
_raised_lock = threading.Lock()


def findings() -> list[Finding]:
    """Findings the guards of this process raised so far."""
    with _raised_lock:
        return list(_raised)


class _Monitor:
    """Host side of one guard: sampled curve, first non-finite loss, gradient explosions."""

    def __init__(self, explode_factor: float, *, echo: bool) -> None:
        self.explode_factor = explode_factor
        self.echo = echo
        self.norms: list[float] = []
        self.raised: set[str] = set()

    def observe(self, step: Any, loss: Any, grad_norm: Any, update_norm: Any, has_loss: Any) -> Any:
        """Host side of a reported step; returns 0 (the device adds it to the step counter)."""
        with contextlib.suppress(Exception):  # monitoring must never break the training step
            self._observe(int(step) + 1, float(loss), float(grad_norm), float(update_norm), bool(has_loss))
        return np.int32(0)

    def _observe(self, step_no: int, loss: float, gnorm: float, unorm: float, has_loss: bool) -> None:
        loss_value = loss if has_loss else None
        if len(self.raised) == 2:
            return  # both findings raised: the run is lost, stay quiet on the remaining steps
        metrics = {"grad_norm": gnorm, "update_norm": unorm}
        if loss_value is not None:
            metrics["loss"] = loss_value
        channel.emit(Step(step=step_no, metrics=metrics))
        if loss_value is not None:
            self._raise(trn001.judge_jax(step_no, loss_value, gnorm, self.norms[-5:]))
        self._raise(trn007.judge_jax(step_no, gnorm, unorm, self.norms, self.explode_factor))
        if math.isfinite(gnorm) and math.isfinite(unorm):
            self.norms.append(gnorm)

    def _raise(self, finding: Finding | None) -> None:
        if finding is None or finding.code in self.raised:
            return
        self.raised.add(finding.code)
        with _raised_lock:
            _raised.append(finding)
        channel.emit(FindingRaised(finding=finding.to_dict()))
        if self.echo:
            sys.stderr.write(
                f"trainmedic: {finding.severity.value} {finding.code} {finding.slug}: {finding.message}\n"
            )
