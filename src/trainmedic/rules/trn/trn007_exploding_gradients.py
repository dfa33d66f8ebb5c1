"""TRN007 `exploding-gradients`: the gradient norm jumps by orders of magnitude or becomes non-finite.

Collectors: the PyTorch guard (`trainmedic.torch`) sends the gradient norm the optimizer
applies on sampled steps as a `grad_norm` metric of `Step` events, and an `update_explosion`
observation when the kept losses and the parameter norm show a one-step explosion between
two samples (`trainmedic.torch._explosion`); `exploding_gradients` judges both, per rank.
The JAX guard (`trainmedic.jax`) decides live, inside `jit`'s host callback, with
`judge_jax` on each reported step's gradient and update norms.

A NaN/Inf that came in with the data is no explosion: when the PyTorch guard's TRN001 says
the batch of step s held non-finite values (`trn001.caused_by_inputs`), a non-finite norm or
loss at step s, or after it with no finite gradient norm in between (the update put the NaN
in the weights), is that finding's, not this one's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from trainmedic.events import Event, GuardObservation, Step
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import Rule, RunRecord, median
from trainmedic.rules._helpers.sampling import per_rank, sampling
from trainmedic.rules.trn.trn001_nonfinite_loss import caused_by_inputs

#: The PyTorch guard's observation of an explosion between two sampled steps.
OBSERVATION = "update_explosion"
# -- thresholds (documented in docs/torch.md) ---------------------------------------------------
# A gradient norm this many times the median of the ones before it is an explosion.
EXPLODE_FACTOR = 100.0
EXPLODE_FLOOR = 1.0
EXPLODE_MIN_HISTORY = 3
# The JAX guard samples every 100th step by default, so its samples lie further apart: a
# norm this many times the median of all earlier samples, once there are this many.
JAX_EXPLODE_FACTOR = 1e3
JAX_MIN_SAMPLES = 3


def _example() -> list[Event]:
    """Gradient norm ~1 for the sampled steps, then 3e4 at step 512."""
    norms = [(100, 1.1), (200, 0.9), (300, 1.0), (400, 1.2), (512, 3e4)]
    return [Step(t=float(step), pid=100, step=step, metrics={"grad_norm": g}) for step, g in norms]


SPEC = FindingSpec(
    code="TRN007",
    slug="exploding-gradients",
    severity=Severity.ERROR,
    title="Exploding gradients",
    what="The gradient norm jumped by orders of magnitude or became non-finite.",
    why=(
        "One such step can destroy the weights; the loss goes NaN soon after. The norm is the "
        "one the optimizer applies (after clipping), measured on sampled steps; a one-step "
        "explosion between two samples is caught from the kept losses and the parameter norm, "
        "which both jump after it. Clipping that cuts the norm on nearly every step, hiding a "
        "sustained explosion, is clipping-saturated (TRN010)."
    ),
    example="Gradient norm ~1 for 500 steps, then 3e4 at step 512.",
    fix="Clip gradients (max_grad_norm=1.0), lower the learning rate, add warm-up, check for bad batches.",
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def exploding_gradients(record: RunRecord) -> list[Finding]:
    """TRN007: the gradient norm becomes non-finite or jumps by orders of magnitude.

    Two sources, the earliest wins per rank: the sampled gradient norms (`Step` metrics),
    and the guard's `update_explosion` observation, which catches a one-step explosion
    between two samples from the window's losses and the parameter norm.
    """
    logged = [s for s in record.curve_steps if "grad_norm" in s.metrics]
    explosions = [o for o in record.guard_observations if o.check == OBSERVATION]
    ranks = set(per_rank(logged)) | set(per_rank(explosions))
    found: list[Finding] = []
    for rank in sorted(ranks, key=lambda r: -1 if r is None else r):
        steps = [s for s in logged if s.rank == rank]
        from_data = _FromData(record, rank, steps)
        candidates = [
            f
            for f in (
                _sampled_norm_jump(record, rank, steps, from_data),
                _between_samples(record, rank, [o for o in explosions if o.rank == rank], from_data),
            )
            if f is not None
        ]
        if candidates:
            found.append(min(candidates, key=lambda f: f.step if f.step is not None else math.inf))
    return found


RULES: tuple[Rule, ...] = (exploding_gradients,)


class _FromData:
    """The steps whose batch held NaN/Inf in its data (the guard's TRN001 says so), and which
    non-finite values they explain: those at such a step, or after it while every sampled
    gradient norm since is non-finite (the update put the data's NaN in the weights)."""

    def __init__(self, record: RunRecord, rank: int | None, steps: list[Step]) -> None:
        self.bad = sorted(
            f.step
            for f in record.raised_findings
            if caused_by_inputs(f) and f.step is not None and (f.rank == rank or f.rank is None)
        )
        self.steps = steps

    def explains(self, step: object) -> bool:
        since = [b for b in self.bad if isinstance(step, int) and b <= step]
        if not isinstance(step, int) or not since:
            return False
        return all(
            not math.isfinite(float(s.metrics["grad_norm"]))
            for s in self.steps
            if s.step is not None and since[-1] <= s.step < step
        )


def _sampled_norm_jump(
    record: RunRecord, rank: int | None, steps: list[Step], from_data: _FromData
) -> Finding | None:
    history: list[float] = []
    for s in steps:
        value = float(s.metrics["grad_norm"])
        if not math.isfinite(value) and from_data.explains(s.step):
            continue
        if not math.isfinite(value):
            return SPEC.finding(
                f"Gradient norm became {value} at step {s.step}",
                evidence={
                    "step": s.step,
                    "grad_norm": value,
                    "last_finite_grad_norm": history[-1] if history else None,
                    "sampling": sampling(record, rank),
                },
                rank=rank,
                step=s.step,
                epoch=epoch_number(s.epoch),
            )
        if len(history) >= EXPLODE_MIN_HISTORY:
            before = median(history[-20:])
            if value >= EXPLODE_FLOOR and value > EXPLODE_FACTOR * before:
                return SPEC.finding(
                    f"Gradient norm jumped to {value:.3g} at step {s.step}, "
                    f"{value / before:.0f}x the median of the steps before ({before:.3g})",
                    evidence={
                        "step": s.step,
                        "grad_norm": value,
                        "median_before": before,
                        "factor": value / before,
                        "threshold_factor": EXPLODE_FACTOR,
                        "sampling": sampling(record, rank),
                    },
                    rank=rank,
                    step=s.step,
                    epoch=epoch_number(s.epoch),
                )
        history.append(value)
    return None


def _between_samples(
    record: RunRecord, rank: int | None, observations: list[GuardObservation], from_data: _FromData
) -> Finding | None:
    if not observations:
        return None
    obs = observations[0]
    d = obs.data
    step = d.get("step", obs.step)
    loss = d.get("loss")
    if isinstance(loss, float) and not math.isfinite(loss) and from_data.explains(step):
        return None
    before, after = d.get("param_norm_before"), d.get("param_norm")
    median_before = d.get("loss_median_before")
    typical = f" (median before {_num(median_before)})" if median_before is not None else ""
    return SPEC.finding(
        f"A gradient explosion between two sampled steps: the loss became {_num(d.get('loss'))} at "
        f"step {step}{typical} and the parameter norm "
        f"went from {_num(before)} at step {d.get('param_norm_step')} to {_num(after)}",
        evidence={
            "step": step,
            "loss": d.get("loss"),
            "loss_median_before": d.get("loss_median_before"),
            "param_norm": after,
            "param_norm_before": before,
            "param_norm_step": d.get("param_norm_step"),
            "detected_at_step": d.get("checked_step"),
            "how": "between sampled gradient norms: the kept losses and the parameter norm",
            "sampling": sampling(record, rank),
        },
        rank=rank,
        step=step if isinstance(step, int) else None,
        epoch=epoch_number(_epoch_of(record, rank, step, obs.epoch)),
    )


def _epoch_of(record: RunRecord, rank: int | None, step: object, sent_in: int | None) -> int | None:
    """The epoch of the step the loss blew up at: that of the first step event at or after it
    on its rank. The observation's own epoch is when the guard checked, which can be later."""
    if not isinstance(step, int):
        return sent_in
    for s in record.steps:
        if s.rank == rank and s.step >= step and s.epoch is not None:
            return s.epoch
    return sent_in


def _num(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) else str(value)


# -- the JAX guard, live --------------------------------------------------------------------------
def judge_jax(
    step: int,
    grad_norm: float,
    update_norm: float,
    earlier_norms: Sequence[float],
    explode_factor: float = JAX_EXPLODE_FACTOR,
) -> Finding | None:
    """TRN007 as the JAX guard raises it: a non-finite gradient or update norm at a reported
    step, or a gradient norm `explode_factor` x the median of the earlier (finite) samples and
    above all of them. A run that has converged has norms orders of magnitude below its first
    ones, and the median of its samples follows them down: a bump back to a norm it already
    trained through is not an explosion (an MLP fitted to near zero loss, 10,000 Adam steps:
    2.8e-7 typical, 0.0019 at one step, its first steps near 1)."""
    if not math.isfinite(grad_norm) or not math.isfinite(update_norm):
        return SPEC.finding(
            f"The gradient norm became {grad_norm} at step {step} (update norm {update_norm})",
            evidence={
                "step": step,
                "grad_norm": grad_norm,
                "update_norm": update_norm,
                "earlier_norms": list(earlier_norms[-5:]),
            },
            step=step,
        )
    if len(earlier_norms) < JAX_MIN_SAMPLES:
        return None
    typical = median(list(earlier_norms))
    if typical <= 0 or grad_norm <= explode_factor * typical or grad_norm <= max(earlier_norms):
        return None
    return SPEC.finding(
        f"The gradient norm jumped to {grad_norm:.3g} at step {step}, "
        f"{grad_norm / typical:.3g}x the median {typical:.3g} of earlier sampled steps",
        evidence={
            "step": step,
            "grad_norm": grad_norm,
            "median_norm": typical,
            "factor": grad_norm / typical,
        },
        step=step,
    )
