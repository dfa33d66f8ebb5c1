"""TRN013 `updates-below-precision`: bf16/fp16 weights do not change although their gradients are non-zero.

Collector: the PyTorch guard (`trainmedic.torch._precision`) copies a sample of every
bf16/fp16 parameter on a checked step, with the elements whose gradient is non-zero, and
compares it at the next checked step, `every` updates later; each comparison is a
`weight_updates` observation (`OBSERVATION`): the elements with a gradient, how many of them did
not change at all, the learning rate, the weights' median magnitude and the dtype's
resolution (half its machine epsilon: 2^-8 for bf16, 2^-11 for fp16; a weight's own
half-unit in the last place is 1 to 2 times smaller, relative to it).

Why these thresholds, on general grounds:

- An element with a gradient that stays bit-identical over `every` (10-100) updates had each
  of them rounded away: rounding to nearest keeps a weight whose update is under half a unit
  in its last place, and Adam-type updates have about the same size step after step, so the
  same elements stay stuck. Healthy low-precision training moves nearly every element with a
  gradient over that many updates.
- `STUCK_SHARE` (50 %): when most of the sampled elements with a gradient never move, most
  of the model is not trained by its gradients; a few stuck elements (large weights, norm
  gains at 1.0) are the known cost of low-precision weights and are not reported.
- Judged over `MIN_READS` (2) comparisons or more, the median share (one comparison can
  span a stretch of tiny gradients), on at least `MIN_ELEMENTS` (100) elements a comparison.
"""

from __future__ import annotations

from trainmedic.events import Event, GuardObservation
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import Rule, RunRecord, median

#: The guard's comparisons of low-precision weights between two checked steps.
OBSERVATION = "weight_updates"
STUCK_SHARE = 0.5
MIN_READS = 2
MIN_ELEMENTS = 100


def _example() -> list[Event]:
    """A bf16 MLP under Adam at lr 2e-4: of ~4,900 sampled elements with a gradient, ~83 %
    are bit-identical 10 updates later."""
    return [
        GuardObservation(
            t=float(step),
            pid=100,
            check=OBSERVATION,
            data={
                "dtype": "bfloat16",
                "resolution": 2.0**-9,
                "moving": 4900,
                "unchanged": 4070,
                "from_step": step - 10,
                "lr": 2e-4,
                "optimizer": "Adam",
                "weight_median": 0.09,
                "moved_change_median": 0.0078,
                "worst_param": "body.0.weight",
                "worst_unchanged_share": 0.91,
            },
            step=step,
        )
        for step in (20, 30, 40, 50)
    ]


SPEC = FindingSpec(
    code="TRN013",
    slug="updates-below-precision",
    severity=Severity.ERROR,
    title="Low-precision weights do not change: their updates round away",
    what=(
        "The model's parameters are bf16 or fp16, and most of their elements did not change at "
        "all over many optimizer steps although their gradients were non-zero: each update was "
        "smaller than half a unit in the last place of the weight (bf16 keeps 8 significant "
        "bits: an update under 1/512 to 1/256 of the weight, depending on where the weight sits between two powers of two, is rounded away). The share of elements that "
        "never moved, the learning rate, the weights' median magnitude (the update/weight ratio) "
        "and the parameter most affected are given."
    ),
    why=(
        "The loss falls a little (the elements that do move, small weights and biases) and then "
        "flattens, so the run looks like a plateau or a learning rate that is too low. With "
        "Adam-type optimizers an update is about the learning rate per element, so at lr 2e-4 "
        "every bf16 weight larger than ~0.1 is frozen; fp16 (11 bits) freezes weights above "
        "~0.4. Mixed precision keeps the weights and the optimizer's update in fp32 for exactly "
        "this reason: model.to(torch.bfloat16) or model.half() before building the optimizer "
        "gives up those fp32 master weights."
    ),
    example=(
        "model.to(torch.bfloat16) and torch.optim.Adam(model.parameters(), lr=2e-4) on an MLP: "
        "77 % of the sampled elements with a gradient were bit-identical 10 updates later; "
        "lr / median |weight| = 2e-4 / 0.089 = 0.0022, under bf16's resolution of 0.002-0.004."
    ),
    fix=(
        "Keep fp32 parameters and run the forward pass in low precision: torch.autocast("
        "device_type, dtype=torch.bfloat16) (Lightning precision='bf16-mixed', HF bf16=True on "
        "an fp32 model); or keep fp32 master weights beside the bf16 model and step the "
        "optimizer on them (torch.optim with foreach on the fp32 copies, then copy back); or an "
        "optimizer with stochastic rounding or Kahan summation for bf16 weights. Raise the "
        "learning rate only where the run justifies it."
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def updates_below_precision(record: RunRecord) -> list[Finding]:
    """TRN013: per rank, most sampled low-precision elements with a gradient never change."""
    by_rank: dict[int | None, list[GuardObservation]] = {}
    for obs in record.guard_observations:
        if obs.check == OBSERVATION and int(obs.data.get("moving", 0)) >= MIN_ELEMENTS:
            by_rank.setdefault(obs.rank, []).append(obs)
    found: list[Finding] = []
    for rank, reads in sorted(by_rank.items(), key=lambda item: -1 if item[0] is None else item[0]):
        shares = [int(o.data.get("unchanged", 0)) / int(o.data["moving"]) for o in reads]
        if len(reads) >= MIN_READS and median(shares) >= STUCK_SHARE:
            found.append(_finding(rank, reads, median(shares)))
    return found


RULES: tuple[Rule, ...] = (updates_below_precision,)


def _finding(rank: int | None, reads: list[GuardObservation], share: float) -> Finding:
    last = reads[-1].data
    dtype, lr, weight = last.get("dtype"), last.get("lr"), last.get("weight_median")
    resolution = float(last.get("resolution") or 0.0)
    ratio = (
        lr / weight if isinstance(lr, (int, float)) and isinstance(weight, (int, float)) and weight else None
    )
    ratio_text = (
        f"; lr / median |weight| = {lr:.3g} / {weight:.3g} = {ratio:.3g}, against {dtype}'s resolution "
        f"{resolution:.3g}"
        if ratio is not None and isinstance(lr, float)
        else ""
    )
    span = int(reads[-1].step or 0) - int(last.get("from_step", 0))
    message = (
        f"{share:.0%} of the sampled {dtype} weight elements with a non-zero gradient did not change "
        f"at all over {span} optimizer steps (median of {len(reads)} comparisons; "
        f"{last.get('worst_param')}: {float(last.get('worst_unchanged_share', 0.0)):.0%}){ratio_text}: "
        f"the updates are below the dtype's resolution and round away"
    )
    return SPEC.finding(
        message,
        evidence={
            "dtype": dtype,
            "unchanged_share": round(share, 4),
            "comparisons": len(reads),
            "steps_between": span,
            "moving_elements": last.get("moving"),
            "unchanged_elements": last.get("unchanged"),
            "lr": lr,
            "optimizer": last.get("optimizer"),
            "weight_median": weight,
            "update_weight_ratio": ratio,
            "resolution": resolution,
            "moved_change_median": last.get("moved_change_median"),
            "worst_param": last.get("worst_param"),
            "shares": [(o.step, round(s, 4)) for o, s in zip(reads, _shares(reads), strict=True)][-20:],
            "thresholds": {"stuck_share": STUCK_SHARE, "min_reads": MIN_READS},
        },
        rank=rank,
        step=reads[0].step,
        epoch=epoch_number(reads[0].epoch),
    )


def _shares(reads: list[GuardObservation]) -> list[float]:
    return [int(o.data.get("unchanged", 0)) / int(o.data["moving"]) for o in reads]
