"""TRN005-TRN008: step-level training dynamics measured inside the process.

These rules read what the in-process guards measure on sampled steps (Step
events with `data_wait_s`/`duration_s` and a `grad_norm` metric, and guard
observations such as per-parameter gradient norms or the tiny-batch overfit
test). Host-syncing measurements are sampled (every N steps) by the guards; the
rules say so in the evidence. TRN001-TRN004 (the metric stream) live in
`dynamics/`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from trainmedic.events import Event, GuardObservation, Step
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import Rule, RunRecord, median


def _input_bound_example() -> list[Event]:
    """num_workers=0 with JPEG decoding: 70 ms of each 100 ms step wait for the next batch."""
    return [Step(t=float(i), pid=100, step=i, duration_s=0.1, data_wait_s=0.07) for i in range(1, 6)]


def _cannot_overfit_batch_example() -> list[Event]:
    """The tiny-batch test: the loss on a fixed batch of 8 stays at 2.2 after 200 steps."""
    result = {"batch_size": 8, "initial_loss": 2.31, "final_loss": 2.2, "steps": 200}
    return [GuardObservation(t=1.0, pid=100, check="overfit_batch", data=result)]


def _exploding_gradients_example() -> list[Event]:
    """Gradient norm ~1 for the sampled steps, then 3e4 at step 512."""
    norms = [(100, 1.1), (200, 0.9), (300, 1.0), (400, 1.2), (512, 3e4)]
    return [Step(t=float(step), pid=100, step=step, metrics={"grad_norm": g}) for step, g in norms]


def _vanishing_gradients_example() -> list[Event]:
    """A 20-layer sigmoid MLP: the first layer's gradient norm is 1e-9 of the last layer's."""
    norms = {"min": 1e-9, "min_param": "layers.0.weight", "max": 1.5, "max_param": "layers.19.weight"}
    return [
        GuardObservation(t=float(step), pid=100, check="grad_norms", data=norms, step=step)
        for step in (100, 200, 300, 400, 500)
    ]


INPUT_BOUND = FindingSpec(
    code="TRN005",
    slug="input-bound",
    severity=Severity.WARNING,
    title="Input-bound: steps wait for data",
    what="Most of each step is spent waiting for the next batch (data-loader bottleneck); the share is given.",
    why=(
        "The accelerator idles while the input pipeline works: the run takes longer for nothing. "
        "trainmedic times the DataLoader's __next__ on every step against the time between "
        "optimizer steps, and reports when the median share is 50% or more (and at least 1 ms)."
    ),
    example="DataLoader(num_workers=0) with JPEG decoding: 70% of each step waits for data.",
    fix="Raise num_workers, use pin_memory and prefetching, cache decoded data, or move augmentation to the device.",
    example_input=_input_bound_example,
)

CANNOT_OVERFIT_BATCH = FindingSpec(
    code="TRN006",
    slug="cannot-overfit-batch",
    severity=Severity.ERROR,
    title="Cannot overfit one small batch",
    what="The tiny-batch overfit test failed: the model cannot drive the loss on one small batch near zero.",
    why="A model that cannot memorise 8 examples has a bug: it will not learn the full data set either.",
    example="Loss on a fixed batch of 8 stays at 2.2 after 200 steps.",
    fix=(
        "Check that the loss gets logits (not probabilities), the labels match the inputs, "
        "parameters are in the optimizer and require grad, and the learning rate."
    ),
    example_input=_cannot_overfit_batch_example,
)

EXPLODING_GRADIENTS = FindingSpec(
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
    example_input=_exploding_gradients_example,
)

VANISHING_GRADIENTS = FindingSpec(
    code="TRN008",
    slug="vanishing-gradients",
    severity=Severity.WARNING,
    title="Vanishing gradients",
    what="The gradient norm of some layers stays near zero.",
    why="Those layers do not learn; deep nets with saturating activations stall this way.",
    example="A 20-layer sigmoid MLP: first-layer gradient norm 1e-9.",
    fix="Use ReLU/GELU, residual connections, normalisation layers, and a suitable initialisation.",
    example_input=_vanishing_gradients_example,
)

# -- thresholds (documented in docs/torch.md) ---------------------------------------------------
# TRN005: the median share of step time spent waiting for the next batch, and a floor on the wait
# itself (below 1 ms per step there is nothing worth a user's time to win).
INPUT_BOUND_SHARE = 0.5
INPUT_BOUND_MIN_WAIT_S = 1e-3
INPUT_BOUND_MIN_RECORDS = 3
# TRN007: a gradient norm this many times the median of the ones before it is an explosion.
EXPLODE_FACTOR = 100.0
EXPLODE_FLOOR = 1.0
EXPLODE_MIN_HISTORY = 3
# TRN008: a weight whose gradient norm stays this far below the largest one, in most checks.
VANISH_RATIO = 1e-7
VANISH_SHARE = 0.8
VANISH_MIN_RECORDS = 3
# TRN006: the overfit test passes when the final loss is this small (absolute, or vs the first).
OVERFIT_ABS = 1e-2
OVERFIT_REL = 0.05


def guard_every(record: RunRecord, rank: int | None = None) -> int | None:
    """How often the in-process guard ran its host-syncing checks (for the evidence)."""
    configs = [o for o in record.guard_observations if o.check == "torch_guard"]
    for obs in sorted(configs, key=lambda o: o.rank != rank):  # this rank's first, then any
        every = obs.data.get("every")
        if isinstance(every, (int, float)):
            return int(every)
    return None


def _sampling(record: RunRecord, rank: int | None) -> str:
    every = guard_every(record, rank)
    if not every:
        return "as logged"
    widened = [o for o in record.guard_observations if o.check == "sampling" and o.rank == rank]
    if not widened:
        return f"checked every {every} steps"
    last = widened[-1].data
    budget = last.get("budget")
    share = f"{budget:.1%}".replace(".0%", "%") if isinstance(budget, float) else "a small share"
    return (
        f"checked every {every} steps, every {last.get('every')} from step {last.get('from_step')} "
        f"(kept under {share} of the step time; the loss curve keeps a point every {every} steps)"
    )


def _per_rank(items: Iterable[Step | GuardObservation]) -> dict[int | None, list[Any]]:
    grouped: dict[int | None, list[Any]] = {}
    for item in items:
        grouped.setdefault(item.rank, []).append(item)
    return grouped


def input_bound(record: RunRecord) -> list[Finding]:
    """TRN005: most of each step is spent in the data loader's `__next__`."""
    timed = [
        s for s in record.steps if s.data_wait_s is not None and s.duration_s is not None and s.duration_s > 0
    ]
    found: list[Finding] = []
    for rank, steps in _per_rank(timed).items():
        steady = steps[1:]  # the first window holds worker start-up and the first fetches
        if len(steady) < INPUT_BOUND_MIN_RECORDS:
            continue
        shares = [min(1.0, s.data_wait_s / s.duration_s) for s in steady]
        share = median(shares)
        wait = median([s.data_wait_s for s in steady])
        step_time = median([s.duration_s for s in steady])
        if share < INPUT_BOUND_SHARE or wait < INPUT_BOUND_MIN_WAIT_S:
            continue
        found.append(
            INPUT_BOUND.finding(
                f"{share:.0%} of each training step was spent waiting for the next batch "
                f"({wait * 1e3:.1f} ms of {step_time * 1e3:.1f} ms per step)",
                evidence={
                    "data_wait_share": round(share, 3),
                    "median_wait_s_per_step": wait,
                    "median_step_s": step_time,
                    "steps": [steady[0].step, steady[-1].step],
                    "windows": len(steady),
                    "sampling": "every step timed; reported per window, " + _sampling(record, rank),
                },
                rank=rank,
                step=steady[-1].step,
            )
        )
    return found


def exploding_gradients(record: RunRecord) -> list[Finding]:
    """TRN007: the gradient norm becomes non-finite or jumps by orders of magnitude.

    Two sources, the earliest wins per rank: the sampled gradient norms (`Step` metrics),
    and the guard's `update_explosion` observation, which catches a one-step explosion
    between two samples from the window's losses and the parameter norm.
    """
    logged = [s for s in record.steps if "grad_norm" in s.metrics]
    explosions = [o for o in record.guard_observations if o.check == "update_explosion"]
    ranks = set(_per_rank(logged)) | set(_per_rank(explosions))
    found: list[Finding] = []
    for rank in sorted(ranks, key=lambda r: -1 if r is None else r):
        candidates = [
            f
            for f in (
                _sampled_norm_jump(record, rank, [s for s in logged if s.rank == rank]),
                _between_samples(record, rank, [o for o in explosions if o.rank == rank]),
            )
            if f is not None
        ]
        if candidates:
            found.append(min(candidates, key=lambda f: f.step if f.step is not None else math.inf))
    return found


def _sampled_norm_jump(record: RunRecord, rank: int | None, steps: list[Step]) -> Finding | None:
    history: list[float] = []
    for s in steps:
        value = float(s.metrics["grad_norm"])
        if not math.isfinite(value):
            return EXPLODING_GRADIENTS.finding(
                f"Gradient norm became {value} at step {s.step}",
                evidence={
                    "step": s.step,
                    "grad_norm": value,
                    "last_finite_grad_norm": history[-1] if history else None,
                    "sampling": _sampling(record, rank),
                },
                rank=rank,
                step=s.step,
                epoch=epoch_number(s.epoch),
            )
        if len(history) >= EXPLODE_MIN_HISTORY:
            before = median(history[-20:])
            if value >= EXPLODE_FLOOR and value > EXPLODE_FACTOR * before:
                return EXPLODING_GRADIENTS.finding(
                    f"Gradient norm jumped to {value:.3g} at step {s.step}, "
                    f"{value / before:.0f}x the median of the steps before ({before:.3g})",
                    evidence={
                        "step": s.step,
                        "grad_norm": value,
                        "median_before": before,
                        "factor": value / before,
                        "threshold_factor": EXPLODE_FACTOR,
                        "sampling": _sampling(record, rank),
                    },
                    rank=rank,
                    step=s.step,
                    epoch=epoch_number(s.epoch),
                )
        history.append(value)
    return None


def _between_samples(
    record: RunRecord, rank: int | None, observations: list[GuardObservation]
) -> Finding | None:
    if not observations:
        return None
    obs = observations[0]
    d = obs.data
    step = d.get("step", obs.step)
    before, after = d.get("param_norm_before"), d.get("param_norm")
    return EXPLODING_GRADIENTS.finding(
        f"A gradient explosion between two sampled steps: the loss became {_num(d.get('loss'))} at "
        f"step {step} (median before {_num(d.get('loss_median_before'))}) and the parameter norm "
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
            "sampling": _sampling(record, rank),
        },
        rank=rank,
        step=step if isinstance(step, int) else None,
        epoch=epoch_number(obs.epoch),
    )


def _num(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) else str(value)


def vanishing_gradients(record: RunRecord) -> list[Finding]:
    """TRN008: a weight's gradient norm stays near zero next to the largest one."""
    norms = [o for o in record.guard_observations if o.check == "grad_norms"]
    found: list[Finding] = []
    for rank, observations in _per_rank(norms).items():
        steady = observations[1:]
        if len(steady) < VANISH_MIN_RECORDS:
            continue
        vanished = [o for o in steady if _vanished(o.data)]
        if len(vanished) < VANISH_SHARE * len(steady):
            continue
        names = [str(o.data.get("min_param")) for o in vanished]
        worst = max(set(names), key=names.count)
        ratios = [_ratio(o.data) for o in vanished]
        found.append(
            VANISHING_GRADIENTS.finding(
                f"Gradient norm of {worst} stayed near zero ({median(ratios):.1e} of the largest "
                f"layer's) in {len(vanished)} of {len(steady)} checked steps",
                evidence={
                    "parameter": worst,
                    "median_ratio_to_largest": median(ratios),
                    "min_grad_norm": min(float(o.data.get("min", 0.0)) for o in vanished),
                    "largest_layer": str(vanished[-1].data.get("max_param")),
                    "checked_steps": [o.step for o in steady],
                    "threshold_ratio": VANISH_RATIO,
                    "sampling": _sampling(record, rank),
                },
                rank=rank,
                step=vanished[-1].step,
            )
        )
    return found


def _ratio(data: dict[str, Any]) -> float:
    top = float(data.get("max", 0.0))
    return float(data.get("min", 0.0)) / top if top > 0 else 0.0


def _vanished(data: dict[str, Any]) -> bool:
    return float(data.get("max", 0.0)) > 0 and _ratio(data) < VANISH_RATIO


def overfit_failed(data: dict[str, Any]) -> bool:
    """The tiny-batch test's verdict, shared by the rule and `overfit_batch`'s result."""
    first, last = float(data["initial_loss"]), float(data["final_loss"])
    if not math.isfinite(last):
        return True
    return last > max(OVERFIT_ABS, OVERFIT_REL * first)


def cannot_overfit_batch(record: RunRecord) -> list[Finding]:
    """TRN006: the tiny-batch overfit test did not drive the loss near zero."""
    found: list[Finding] = []
    for obs in record.guard_observations:
        if obs.check != "overfit_batch" or not overfit_failed(obs.data):
            continue
        data = obs.data
        target = max(OVERFIT_ABS, OVERFIT_REL * float(data["initial_loss"]))
        found.append(
            CANNOT_OVERFIT_BATCH.finding(
                f"Loss on one batch of {data.get('batch_size')} went from {data['initial_loss']:.4g} "
                f"to {data['final_loss']:.4g} in {data['steps']} steps (target <= {target:.3g})",
                evidence={**data, "target_loss": target},
                rank=obs.rank,
            )
        )
    return found


SPECS: tuple[FindingSpec, ...] = (INPUT_BOUND, CANNOT_OVERFIT_BATCH, EXPLODING_GRADIENTS, VANISHING_GRADIENTS)

RULES: tuple[Rule, ...] = (input_bound, cannot_overfit_batch, exploding_gradients, vanishing_gradients)
