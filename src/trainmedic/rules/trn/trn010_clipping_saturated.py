"""TRN010 `clipping-saturated`: gradient clipping engages on nearly every step by a large factor.

Collector: the PyTorch guard (`trainmedic.torch._clipping`) counts the calls of
`clip_grad_norm_`/`clip_grad_value_` and sends a `clipping` observation (`OBSERVATION`) at every
read: how many clipping calls there were since the last one, how many engaged, the median
factor by which clipping shrank the gradient's norm, and the pre-clip norms.

Why these thresholds, on general grounds:

- A clipping threshold is meant to cut rare spikes (Pascanu et al., 2013): set
  near the typical gradient norm of a healthy run, it engages on some steps, or on
  most steps by a small factor when it is set tight (the official PyTorch
  word-language-model example clips at 0.25; HF Trainer's default 1.0 is below the
  norm of many fine-tuning runs). Such runs clip often by a factor of 1-5.
- When the norm before clipping is `CLIP_FACTOR` (10) times the threshold or more
  at `CLIP_ENGAGED_SHARE` (90 %) of the steps or more, the norm is an order of
  magnitude above what the threshold was chosen for: with SGD every update is the
  threshold's length whatever the gradient says (the learning rate and its
  schedule no longer set the step size); with Adam-type optimizers, which undo a
  steady rescaling, clipping only hides the norm. Step-to-step noise of a steady
  run's gradient norm is well within 10x, so this is not a tight threshold
  meeting noise.
- Early training has the largest gradients and warm-up is where clipping is meant
  to work: the first `CLIP_WARMUP_SHARE` (20 %) of the clipped steps are not
  judged, and at least `CLIP_MIN_CALLS` measured calls must follow them.
- Saturation alone is not reported: clipping can be the normal operating mode by design.
  PPO clips at `max_grad_norm=0.5` while its value loss on raw returns has gradients of
  norm 10-100 (a factor ~70 on every step, Adam undoes it); Lightning's Transformer LM
  example clips at 0.25 with SGD (every update then has length lr x 0.25, normalised
  SGD, and the loss falls steadily). Such runs learn. Saturated clipping hides a
  blow-up only when the blow-up shows past it, and one of these is then required:
  the pre-clip norm grew `CLIP_GROWTH` (10x) or more over the judged steps (median of
  the last quarter of the reads against the first: a steady run's norm drifts by small
  factors as its loss scale moves, a PPO run's from ~16 to ~40 as returns grow; a
  blow-up compounds); the pre-clip norm was not finite; or the training loss at the end
  of the judged steps (median of their last quarter) is `CLIP_LOSS_RISE` (2x) its level
  at the run's first logged steps or more: the updates threw away what the untrained
  model had, whatever the loss did in between (a loss that blew up to 2,000 and fell
  back to 290 from 1.4 is not improving). A loss that stalls near its start is
  not-learning's (TRN003) case, and a loss whose targets move with the run (PPO's value
  loss on returns that grow as the policy improves: 1.6x over a run that learns) stays
  below 2x.
"""

from __future__ import annotations

from trainmedic.events import Event, GuardObservation, Step
from trainmedic.evidence.curves import curve, train_loss
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import Rule, RunRecord, median, weighted_median

#: The guard's clipping counters, read every few steps.
OBSERVATION = "clipping"
CLIP_WARMUP_SHARE = 0.2
CLIP_MIN_CALLS = 10
CLIP_ENGAGED_SHARE = 0.9
CLIP_FACTOR = 10.0
CLIP_GROWTH = 10.0
CLIP_LOSS_RISE = 2.0


def _example() -> list[Event]:
    """clip_grad_norm_(max_norm=1.0) on gradients of norm ~40: every read of 10 steps clipped
    them all, by ~40x (the guard reads its counters every 10 steps), while the loss rose from
    2.3 to ~9."""
    reads: list[Event] = [Step(t=0.0, pid=100, step=1, metrics={"loss": 2.3})]
    for first in range(1, 100, 10):
        last = first + 9
        counters = {"calls": 10, "engaged": 10, "factor_median": 40.0, "first_step": first, "last_step": last}
        norms = {"norm_median": 40.0, "norm_max": 55.0, "threshold": 1.0, "kind": "norm"}
        reads.append(
            Step(t=float(last), pid=100, step=last + 1, metrics={"loss": min(9.0, 2.3 + 0.9 * last)})
        )
        reads.append(
            GuardObservation(t=float(last), pid=100, check=OBSERVATION, data=counters | norms, step=last)
        )
    return reads


SPEC = FindingSpec(
    code="TRN010",
    slug="clipping-saturated",
    severity=Severity.WARNING,
    title="Gradient clipping engages on nearly every step and hides a blow-up",
    what=(
        "After warm-up, gradient clipping engaged on nearly every step, the gradient norm "
        "before clipping was many times the threshold, and the run shows a blow-up past it: "
        "the pre-clip norm grew tenfold or more over those steps, was not finite, or the "
        "training loss ended at twice its level at the start or more. The pre-clip norms, the "
        "threshold, how often clipping engaged and what showed the blow-up are given. Clipping "
        "on every step while the loss improves and the norm stays put (PPO's max_grad_norm=0.5, "
        "a language model clipped at 0.25) is clipping by design and is not reported."
    ),
    why=(
        "The norm after clipping is the threshold at every such step, so the gradient norm the "
        "optimizer applies looks healthy and an explosion stays hidden (exploding-gradients "
        "reads that norm). With SGD every update has the threshold's length whatever the "
        "gradient says, so the learning rate no longer sets the step size; Adam-type optimizers "
        "undo a steady rescaling anyway, so there clipping mostly hides the norm. Either way the "
        "run is far from where the threshold was chosen for. Many healthy runs clip on every "
        "step by design, so saturation alone says nothing; a norm that keeps growing past the "
        "clip, or a loss worse than the untrained model's, says the weights are blowing up "
        "behind it. The usual causes are a learning "
        "rate far too high (the weights blew up), or a loss or gradient scale that is wrong: a "
        "sum-reduced loss, unnormalised targets, or AMP gradients clipped while still "
        "multiplied by the loss scale. Judged after the first 20 % of the clipped steps: "
        "clipping in early training and warm-up is what it is for."
    ),
    example=(
        "A Transformer LM with clip_grad_norm_(params, 0.8) and lr=1000 (10,000x too high): the "
        "norm after clipping is 0.8 at every step, the norm before it a median ~950 (~1,200x); "
        "clipping engaged on 120 of 120 steps after warm-up and the loss went from 4.06 to "
        "~1.8e5."
    ),
    fix=(
        "Lower the learning rate (with SGD, the median factor clipping cuts by is a first guess) "
        "or add warm-up; "
        "with AMP call scaler.unscale_(optimizer) before clip_grad_norm_; check the loss "
        "reduction and the scale of inputs and targets. Then set the threshold just above the "
        "typical pre-clip norm of a healthy run, so that it cuts spikes only, or keep it where "
        "the algorithm sets it (PPO's max_grad_norm) once the run learns again."
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def clipping_saturated(record: RunRecord) -> list[Finding]:
    """TRN010: per rank, clipping after warm-up engaged on nearly every step by a large factor."""
    found: list[Finding] = []
    by_rank: dict[int | None, list[GuardObservation]] = {}
    for obs in record.guard_observations:
        if obs.check == OBSERVATION and int(obs.data.get("calls", 0)) > 0:
            by_rank.setdefault(obs.rank, []).append(obs)
    for rank, observations in sorted(by_rank.items(), key=lambda item: -1 if item[0] is None else item[0]):
        judged = _after_warmup(observations)
        calls = sum(int(o.data["calls"]) for o in judged)
        if calls < CLIP_MIN_CALLS:
            continue
        engaged = sum(int(o.data.get("engaged", 0)) for o in judged)
        factor = weighted_median([(float(o.data.get("factor_median", 1.0)), _reads(o)) for o in judged])
        if engaged >= CLIP_ENGAGED_SHARE * calls and factor >= CLIP_FACTOR:
            shown = _blow_up(record, judged)
            if shown is not None:
                found.append(
                    _finding(rank, judged=judged, calls=calls, engaged=engaged, factor=factor, shown=shown)
                )
    return found


RULES: tuple[Rule, ...] = (clipping_saturated,)


def _after_warmup(observations: list[GuardObservation]) -> list[GuardObservation]:
    """The reads whose calls all come after the first CLIP_WARMUP_SHARE of the clipped steps."""
    first = min(int(o.data.get("first_step", 0)) for o in observations)
    last = max(int(o.data.get("last_step", 0)) for o in observations)
    boundary = first + CLIP_WARMUP_SHARE * (last - first)
    return [o for o in observations if int(o.data.get("first_step", 0)) > boundary]


def _blow_up(record: RunRecord, judged: list[GuardObservation]) -> tuple[str, dict[str, object]] | None:
    """What shows a blow-up past the saturated clipping (a sentence and its evidence), or None
    when the run goes on as clipping by design does: a steady norm and a loss that improves."""
    import math

    if sum(int(o.data.get("nonfinite", 0)) for o in judged):
        return "the pre-clip norm was not finite", {"shown_by": "nonfinite pre-clip norm"}
    norms = [
        (float(o.data["norm_median"]), _reads(o)) for o in judged if o.data.get("norm_median") is not None
    ]
    reads = sum(n for _, n in norms)
    if reads >= 2:
        quarter = max(1, reads // 4)  # the first and the last quarter of the reads
        early, late = weighted_median(_head(norms, quarter)), weighted_median(_head(norms[::-1], quarter))
        if early > 0 and late >= CLIP_GROWTH * early:
            growth = {"shown_by": "pre-clip norm growth", "preclip_norm_growth": round(late / early, 3)}
            return (
                f"the pre-clip norm grew {late / early:.3g}x over these steps ({early:.3g} to {late:.3g})",
                growth,
            )
    named = train_loss(record)
    loss = curve(record, named.name, prefer="step") if named is not None else None
    if loss is None or loss.per != "step" or len(loss) < 2:
        return None
    first_step, last_step = int(judged[0].data.get("first_step", 0)), int(judged[-1].data.get("last_step", 0))
    head = loss.y[:3]  # the untrained model's level: its lowest over the first logged steps
    span = loss.y[(loss.x >= first_step) & (loss.x <= last_step)]
    start = min([float(v) for v in head if math.isfinite(v)] or [math.nan])
    if len(span) < 4 or not start > 0:
        return None
    after = median(span[-max(2, len(span) // 4) :].tolist())
    if after < CLIP_LOSS_RISE * start:  # nan compares False: a non-finite loss is a blow-up
        return None
    evidence = {"shown_by": "loss", "start_loss": start, "loss_at_end": after}
    return (
        f"the loss ended at {after / start:.3g}x its level at the start "
        f"({start:.4g} at the start, {after:.4g} at the end)",
        evidence,
    )


def _finding(
    rank: int | None,
    *,
    judged: list[GuardObservation],
    calls: int,
    engaged: int,
    factor: float,
    shown: tuple[str, dict[str, object]],
) -> Finding:
    first, last = judged[0].data, judged[-1].data
    norms = [
        (float(o.data["norm_median"]), _reads(o)) for o in judged if o.data.get("norm_median") is not None
    ]
    peaks = [float(o.data["norm_max"]) for o in judged if o.data.get("norm_max") is not None]
    threshold = last.get("threshold")
    typical = weighted_median(norms) if norms else None
    kind = "norm" if last.get("kind") == "norm" else "value"
    message = (
        f"Gradient clipping engaged on {engaged} of {calls} steps after warm-up (steps "
        f"{first.get('first_step')}-{last.get('last_step')}) and cut the gradient norm by a median "
        f"{factor:.3g}x: pre-clip norm median {_num(typical)}, largest {_num(max(peaks) if peaks else None)}, "
        f"threshold {threshold:g} (clip_grad_{kind}_); {shown[0]}: clipping hides a blow-up"
    )
    return SPEC.finding(
        message,
        evidence={
            "clipping": f"clip_grad_{kind}_",
            "threshold": threshold,
            "steps": [first.get("first_step"), last.get("last_step")],
            "calls": calls,
            "engaged": engaged,
            "engaged_share": round(engaged / calls, 3),
            "median_factor": factor,
            "median_preclip_norm": typical,
            "max_preclip_norm": max(peaks) if peaks else None,
            "nonfinite_preclip_norms": sum(int(o.data.get("nonfinite", 0)) for o in judged),
            "preclip_norms": [(o.step, o.data.get("norm_median")) for o in judged][-20:],
            "measured": last.get("measured"),
            "thresholds": {
                "engaged_share": CLIP_ENGAGED_SHARE,
                "factor": CLIP_FACTOR,
                "norm_growth": CLIP_GROWTH,
                "loss_rise": CLIP_LOSS_RISE,
            },
            **shown[1],
        },
        rank=rank,
        step=int(first.get("first_step", 0)) or judged[0].step,
        epoch=epoch_number(judged[0].epoch),
    )


def _reads(observation: GuardObservation) -> int:
    """How many of the guard's reads an observation stands for (the writer merges a long run's
    reads into buckets: `eventlog.samples`, their counters summed, their medians' median kept)."""
    return int(observation.data.get("reads", 1))


def _head(points: list[tuple[float, int]], reads: int) -> list[tuple[float, int]]:
    """The first `reads` reads of the points (the last point cut to fit)."""
    out: list[tuple[float, int]] = []
    for value, n in points:
        if reads <= 0:
            break
        out.append((value, min(n, reads)))
        reads -= n
    return out


def _num(value: float | None) -> str:
    return f"{value:.3g}" if value is not None else "unknown"
