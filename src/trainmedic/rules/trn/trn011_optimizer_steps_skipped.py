"""TRN011 `optimizer-steps-skipped`: the gradient scaler skipped most optimizer steps.

Collector: the PyTorch guard (`trainmedic.torch._scaler`) counts the calls of
`GradScaler.unscale_` (one an iteration) and the optimizer steps taken; every `every`
iterations it sends a `grad_scaler` observation (`OBSERVATION`): the iterations since the last
read, how many of them stepped no optimizer (skipped: inf/NaN gradients), the scale, and,
once found, the first parameter whose gradient was not finite.

Why these thresholds, on general grounds:

- Dynamic loss scaling skips by design: it starts high (2^16 by default) and halves the
  scale at each overflow until the gradients fit fp16; then it grows the scale every
  `growth_interval` (2,000) clean steps and skips once when that overflows. A healthy run
  skips its first few iterations and then about one in 2,000 (0.05 %).
- Settling from the default 2^16 takes at most as many skips as halvings needed to bring
  the largest scaled gradient under fp16's 65,504: 16 halvings reach a scale of 1, where
  the scaled gradients are the real ones. `MIN_SKIPPED` (32), twice that, is more than any
  settling takes; a scaler started at 2^24 settles within 24.
- `SKIP_SHARE` (50 %): when most iterations are skipped, most of the run's data never
  updates the weights, whatever the scale does. The share is over the iterations after the
  first `SETTLE_ITERATIONS` (32, the settling's bound above), so that a short healthy run's
  early skips are not counted against it; at least `MIN_JUDGED` (20) iterations are judged.
"""

from __future__ import annotations

from trainmedic.events import Event, GuardObservation
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import Rule, RunRecord

#: The guard's reads of the gradient scaler, every few iterations.
OBSERVATION = "grad_scaler"
SETTLE_ITERATIONS = 32
MIN_SKIPPED = 32
MIN_JUDGED = 20
SKIP_SHARE = 0.5


def _example() -> list[Event]:
    """fp16 autocast with NaN gradients on most batches: of every 10 iterations 9 are skipped,
    and the scale halves 9 times per read."""
    reads: list[Event] = []
    scale = 65536.0
    for read in range(12):
        scale /= 2**9
        data: dict[str, object] = {"iterations": 10, "skipped": 9, "scale": scale, "init_scale": 65536.0}
        if read >= 1:
            data["first_nonfinite_param"] = "weight"
        reads.append(GuardObservation(t=float(read), pid=100, check=OBSERVATION, data=data, step=read + 1))
    return reads


SPEC = FindingSpec(
    code="TRN011",
    slug="optimizer-steps-skipped",
    severity=Severity.ERROR,
    title="The gradient scaler skipped most optimizer steps",
    what=(
        "Under mixed precision, the gradient scaler (torch.amp.GradScaler) skips the optimizer "
        "step of every iteration whose gradients hold an inf or a NaN, and lowers its scale. "
        "Here most iterations after the scale's first settling were skipped: the weights barely "
        "moved while the loss stayed finite. The share of skipped iterations, the scale's "
        "history and the first parameter with a non-finite gradient are given."
    ),
    why=(
        "A skipped step is invisible: no exception, no warning, a finite loss that looks merely "
        "flat, and the run takes its full time. Dynamic loss scaling skips a few iterations at "
        "the start and then about one in growth_interval (2,000); when it skips most of them, "
        "the gradients are non-finite at any scale: a NaN that comes from the model itself (the "
        "gradient of sqrt or of a norm at 0, log of 0, a division by a zero variance), from an "
        "overflow in a layer that runs in fp16 (an attention score, a large activation), or from "
        "the data. The scale then keeps falling toward 0."
    ),
    example=(
        "fp16 autocast on a model that computes sqrt(sum(x**2)) of a learned scale times the "
        "input: zero (padding) rows give a NaN gradient on nearly every batch; 107 of 120 "
        "iterations were skipped, the scale fell from 65,536 to 4e-28, the loss stayed near 0.69."
    ),
    fix=(
        "Find the source of the non-finite gradient in the parameter named: make the operation "
        "safe at 0 (sqrt(x + eps), torch.linalg.vector_norm, clamp before log or division), "
        "or run the overflowing part in fp32 (torch.autocast(..., enabled=False) around it). "
        "Prefer bf16 autocast where the hardware has it: it has fp32's range and needs no "
        "GradScaler. If the scale only started too high, GradScaler(init_scale=2.0**10) settles "
        "sooner."
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def optimizer_steps_skipped(record: RunRecord) -> list[Finding]:
    """TRN011: per rank, most iterations under a gradient scaler skipped after it settled."""
    by_rank: dict[int | None, list[GuardObservation]] = {}
    for obs in record.guard_observations:
        if obs.check == OBSERVATION:
            by_rank.setdefault(obs.rank, []).append(obs)
    found: list[Finding] = []
    for rank, reads in sorted(by_rank.items(), key=lambda item: -1 if item[0] is None else item[0]):
        judged, skipped, seen = 0, 0, 0
        for obs in reads:
            iterations = int(obs.data.get("iterations", 0))
            counted = max(0, min(iterations, seen + iterations - SETTLE_ITERATIONS))
            share = counted / iterations if iterations else 0.0
            judged += counted
            skipped += round(int(obs.data.get("skipped", 0)) * share)
            seen += iterations
        if judged >= MIN_JUDGED and skipped >= MIN_SKIPPED and skipped >= SKIP_SHARE * judged:
            found.append(_finding(rank, reads, judged=judged, skipped=skipped))
    return found


RULES: tuple[Rule, ...] = (optimizer_steps_skipped,)


def _finding(rank: int | None, reads: list[GuardObservation], *, judged: int, skipped: int) -> Finding:
    total = sum(int(o.data.get("iterations", 0)) for o in reads)
    all_skipped = sum(int(o.data.get("skipped", 0)) for o in reads)
    history, iteration = [], 0  # (iterations so far, the scale then)
    for o in reads:
        iteration += int(o.data.get("iterations", 0))
        if o.data.get("scale") is not None:
            history.append((iteration, o.data["scale"]))
    first_scale = reads[0].data.get("init_scale")
    last_scale = history[-1][1] if history else None
    param = next(
        (o.data["first_nonfinite_param"] for o in reads if o.data.get("first_nonfinite_param")), None
    )
    named = f"; the first parameter with a non-finite gradient: {param}" if param else ""
    message = (
        f"The gradient scaler skipped {all_skipped} of {total} optimizer steps "
        f"({skipped} of the {judged} after its first {SETTLE_ITERATIONS}: {skipped / judged:.0%}): "
        f"their gradients held an inf or a NaN; the scale fell from {_num(first_scale)} to "
        f"{_num(last_scale)}{named}. The weights barely moved while the loss looked merely flat"
    )
    first_skip = next((o for o in reads if int(o.data.get("skipped", 0))), reads[0])
    return SPEC.finding(
        message,
        evidence={
            "iterations": total,
            "skipped": all_skipped,
            "judged_iterations": judged,
            "skipped_judged": skipped,
            "skipped_share": round(skipped / judged, 3),
            "init_scale": first_scale,
            "final_scale": last_scale,
            "scale_history": history[:5] + history[5:][-15:],
            "first_nonfinite_param": param,
            "thresholds": {"skip_share": SKIP_SHARE, "min_skipped": MIN_SKIPPED, "settle": SETTLE_ITERATIONS},
        },
        rank=rank,
        step=first_skip.step,
        epoch=epoch_number(first_skip.epoch),
    )


def _num(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) else str(value)
