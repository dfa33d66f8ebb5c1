"""Gradient clipping seen from both sides: the norm before it, the threshold, how often it cut.

Whenever clipping engages, the gradient the optimizer receives has exactly the
threshold's norm, so the norm the guard measures on the optimizer's gradients
cannot show an explosion that clipping absorbs at every step. The clipping
functions compute the norm before clipping anyway, and `clip_grad_norm_`
returns it; Lightning's `gradient_clip_val`, the HF Trainer's `max_grad_norm`
and Accelerate's `clip_grad_norm_` all end in it. This module keeps it as the
losses are kept (`_reads.kept`: on the CPU its value, read at once, no sync there;
elsewhere the tensor by reference, no tensor op and no host read) and hands it to
the monitor's next sampled read, which reads it in the same transfer as the
kept losses.

- Norm clipping: `clip_grad_norm_` scales the gradients through the module
  helper `_clip_grads_with_norm_(parameters, max_norm, total_norm)` (torch
  2.6 and later), which sees the norm before clipping and the threshold.
  Wrapping that helper catches every `clip_grad_norm_` call, also through a name
  bound before the guard started (`from torch.nn.utils import clip_grad_norm_`);
  the public `clip_grads_with_norm_` (the two-step form of FSDP2 loops) is
  wrapped too. On older torch, `clip_grad_norm_` itself is.
- Value clipping: `clip_grad_value_` returns nothing and computes no norm. On
  sampled steps only, the total norm is measured before and after it (the same
  `get_total_norm` that `clip_grad_norm_` uses), which says how much it cut.

At each read the calls since the last one become one `clipping` observation
(calls, how many engaged, the median and largest pre-clip norm, the median
factor by which clipping shrank the gradient) and one point of the
`grad_norm_preclip` curve; `trainmedic.rules.trn.trn010_clipping_saturated` judges them.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from torch.nn.utils import clip_grad as _clip_grad

import torch
from trainmedic.events import Metric
from trainmedic.record import median
from trainmedic.torch._reads import floats, kept, readable
from trainmedic.torch._safety import contained, turn_off

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

PRECLIP_METRIC = "grad_norm_preclip"  # the curve's name: the report draws it beside grad_norm
MAX_KEPT_CLIPS = 4096  # clip calls with no read since (no optimizer step): the oldest are dropped
_get_total_norm: Callable[..., Any] | None = getattr(torch.nn.utils, "get_total_norm", None)

Wrap = Callable[[Any, str, Callable[[Any], Any]], None]
Active = Callable[[], "MonitorLike | None"]


class _Clip(NamedTuple):
    """One clipping call, kept until the next read."""

    step: int  # the optimizer step it belongs to
    norm: Any  # total gradient norm before clipping, as `_reads.kept` keeps it (a value, or a tensor)
    limit: float  # max_norm (norm clipping) or clip_value (value clipping)
    after: Any  # value clipping: the total norm after it (a tensor); None for norm clipping


class Pending(NamedTuple):
    """The calls taken for one read, and their norms for it (in this order): values read already, or
    tensors the read includes in its single transfer."""

    calls: list[_Clip]
    kept: list[Any]


class ClipWatch:
    """What the monitor knows about gradient clipping between two reads."""

    def __init__(self, monitor: MonitorLike) -> None:
        self.monitor = monitor
        self.pending: deque[_Clip] = deque(maxlen=MAX_KEPT_CLIPS)

    def samples_now(self) -> bool:
        """Value clipping is measured on the steps the monitor samples (its norms cost tensor ops)."""
        upcoming = self.monitor.step + 1
        return _get_total_norm is not None and (upcoming == 1 or upcoming % self.monitor.every == 0)

    def norm_of(self, params: list[Any]) -> Any:
        """The total gradient norm of `params` (a tensor, not read), as `clip_grad_norm_` computes it."""
        grads = [g for g in (readable(p.grad) for p in params if p.grad is not None) if g is not None]
        if not grads or _get_total_norm is None:
            return None
        with torch.no_grad():
            return _get_total_norm(grads)

    def on_value_clip(self, params: list[Any], before: Any, clip_value: Any) -> None:
        """A sampled `clip_grad_value_`: keep the norms before and after it by reference."""
        self.pending.append(_Clip(self.monitor.step + 1, before, float(clip_value), self.norm_of(params)))

    def take(self) -> Pending:
        """The calls since the last read: their norms go into the read's single transfer."""
        calls = list(self.pending)
        self.pending.clear()
        return Pending(calls, [c.norm for c in calls] + [c.after for c in calls if c.after is not None])

    def read_rest(self) -> None:
        """At the end: the calls no check read (after the last one, when the optimizer died first)."""
        pending = self.take()
        if pending.calls:
            with torch.no_grad():
                self.report(pending, floats(pending.kept))

    def report(self, pending: Pending, values: list[float]) -> None:
        """The values read for `pending.kept`: one `clipping` observation, one curve point."""
        calls = pending.calls
        if not calls:
            return
        norms, afters = values[: len(calls)], iter(values[len(calls) :])
        factors = [
            _factor(c, n, next(afters) if c.after is not None else None)
            for c, n in zip(calls, norms, strict=True)
        ]
        finite = [n for n in norms if math.isfinite(n)]
        last = calls[-1]
        monitor = self.monitor
        monitor.observe(
            "clipping",
            {
                "kind": "norm" if last.after is None else "value",
                "threshold": last.limit,
                "calls": len(calls),
                "engaged": sum(f > 1.0 for f in factors),
                "first_step": calls[0].step,
                "last_step": last.step,
                "norm_median": median(finite) if finite else None,
                "norm_max": max(finite) if finite else None,
                "nonfinite": len(norms) - len(finite),
                "factor_median": median(factors),
                "measured": "every call" if last.after is None else f"sampled steps (every {monitor.every})",
            },
            once=False,
            step=last.step,
        )
        epoch = monitor.known_epoch()
        monitor.emit(Metric(name=PRECLIP_METRIC, value=norms[-1], step=last.step, epoch=epoch))


def _factor(call: _Clip, norm: float, after: float | None) -> float:
    """How many times smaller clipping made the gradient's norm (1.0: it did not engage)."""
    if not math.isfinite(norm):
        return math.inf
    if after is None:  # norm clipping scales by limit / norm when the norm is above the limit
        if norm <= call.limit:
            return 1.0
        return norm / call.limit if call.limit > 0 else math.inf
    if norm <= after:
        return 1.0
    return norm / after if after > 0 else math.inf


# -- the wrappers -----------------------------------------------------------------------------------
def install(wrap: Wrap, active: Active) -> None:
    """Wrap the clipping functions with `wrap` (which records how to undo it)."""
    utils = torch.nn.utils
    if "_clip_grads_with_norm_" in vars(_clip_grad):
        wrap(_clip_grad, "_clip_grads_with_norm_", lambda original: _scaler(original, active))
        if "clip_grads_with_norm_" in vars(utils):
            wrap(utils, "clip_grads_with_norm_", lambda original: _scaler(original, active))
    else:  # torch < 2.6: clip_grad_norm_ computes and scales in one function
        for owner in (_clip_grad, utils):
            wrap(owner, "clip_grad_norm_", lambda original: _norm_clipper(original, active))
    for owner in (_clip_grad, utils):
        wrap(owner, "clip_grad_value_", lambda original: _value_clipper(original, active))


def _scaler(original: Any, active: Active) -> Any:
    def clip_grads_with_norm_(
        parameters: Any, max_norm: Any, total_norm: Any, *args: Any, **kwargs: Any
    ) -> Any:
        result = original(parameters, max_norm, total_norm, *args, **kwargs)
        _note_norm(active(), total_norm, max_norm)
        return result

    return clip_grads_with_norm_


def _norm_clipper(original: Any, active: Active) -> Any:
    def clip_grad_norm_(parameters: Any, max_norm: Any, *args: Any, **kwargs: Any) -> Any:
        total_norm = original(parameters, max_norm, *args, **kwargs)
        _note_norm(active(), total_norm, max_norm)
        return total_norm

    return clip_grad_norm_


def _note_norm(monitor: MonitorLike | None, total_norm: Any, max_norm: Any) -> None:
    """Keep the pre-clip norm of a norm clipping (a reference, no read): the wrappers' one call."""
    if monitor is None or monitor.broken or type(total_norm) is not torch.Tensor:
        return  # a DTensor's value would need a collective
    try:
        limit = float(max_norm)  # clipping itself converted it already
        if math.isfinite(limit):  # max_norm=inf measures the norm without clipping (the HF Trainer)
            monitor.clipping.pending.append(_Clip(monitor.step + 1, kept(total_norm), limit, None))
    except Exception as exc:
        turn_off(monitor, "clip_grad_norm_", exc)


def _value_clipper(original: Any, active: Active) -> Any:
    def clip_grad_value_(parameters: Any, clip_value: Any, *args: Any, **kwargs: Any) -> Any:
        monitor = active()
        if monitor is None or monitor.broken or not monitor.clipping.samples_now():
            return original(parameters, clip_value, *args, **kwargs)
        # A generator of parameters can be read once: the measurement and the clipping share a list.
        params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
        before = _safely(monitor, monitor.clipping.norm_of, params)
        result = original(params, clip_value, *args, **kwargs)
        if before is not None:
            _safely(monitor, monitor.clipping.on_value_clip, params, before, clip_value)
        return result

    return clip_grad_value_


def _safely(monitor: MonitorLike, hook: Callable[..., Any], *args: Any) -> Any:
    """A sampled measurement: a failure costs it (`_safety.contained`), never the training."""
    return contained(monitor, hook.__name__, hook, *args)
