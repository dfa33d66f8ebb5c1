"""TRN002 `loss-divergence`: the training loss rose far above its minimum and kept rising.

Collectors: whatever sends the training loss as `Epoch`/`Step`/`Metric` events (a Keras
history, the guards' sampled steps, the boosters' rounds, a TensorBoard or HF log read by
`diagnose`); `_helpers/curves.py` picks the curve. Two tests: the smoothed loss ends far
above its minimum (an additive test against the curve's noise), or, on runs of any length
from 3 points, its last points all sit an order of magnitude above its start. RUN's crash
rule asks `loss_divergence` whether a divergence explains an overflow.
"""

from __future__ import annotations

from trainmedic.events import Event, Step
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.curves import (
    Curve,
    at,
    centred_on_zero,
    curve,
    noise_sigma,
    reduce,
    rolling_median,
    smoothing_window,
    train_loss,
    where,
)

# -- thresholds (documented in docs/diagnose.md) ---------------------------------------------
#: TRN002 needs this many finite points of the training loss.
DIVERGENCE_MIN_POINTS = 8
#: TRN002: the end of the curve must sit above its minimum by at least the largest of
#: RISE_OVER_MIN x |minimum|, RISE_OVER_DROP x (what it had gained from the start) and
#: RISE_NOISE x the point-to-point noise.
RISE_OVER_MIN = 1.0
RISE_OVER_DROP = 0.5
RISE_NOISE = 5.0
#: TRN002: "kept rising": the end level holds at least this share of the rise to the peak.
RISE_HELD = 0.7
#: TRN002, short runs and explosions: a positive loss whose last points all sit this many
#: times above its starting level has left the untrained model far behind (the start is the
#: loss of random weights: ln K for a classifier, the target's variance for a regressor). The
#: additive test above measures noise on the whole curve, and the scatter of a blown-up loss
#: hides the rise; a ratio to the start does not depend on it. Three points suffice: the guard
#: keeps one loss point per 10 steps, so a 28-step run has three.
EXPLOSION_FACTOR = 10.0
EXPLOSION_MIN_POINTS = 3


def _example() -> list[Event]:
    """Loss falls from 2.3 to 0.4 by step 300, then climbs steadily to 5.0 by step 600."""
    falling = [2.3 - (2.3 - 0.4) * i / 15 for i in range(16)]  # steps 0, 20, ..., 300
    rising = [0.4 + (5.0 - 0.4) * i / 15 for i in range(1, 16)]  # steps 320, ..., 600
    return [
        Step(t=float(i), pid=100, step=20 * i, metrics={"loss": loss})
        for i, loss in enumerate(falling + rising)
    ]


SPEC = FindingSpec(
    code="TRN002",
    slug="loss-divergence",
    severity=Severity.ERROR,
    title="Loss diverged",
    what=(
        "The smoothed training loss ends far above its minimum (more than its own size, or half "
        "of what it had gained, and 5x its noise) and stays there; or, on runs of any length "
        "from 3 loss points, its last points all sit 10x above where it started. The step it "
        "left is given."
    ),
    why="The optimiser has left the region it was converging to; more steps make it worse.",
    example="Loss falls to 0.4 by step 300, then climbs steadily to 5.0 by step 600.",
    fix="Lower the learning rate (or its peak), add warm-up and gradient clipping.",
    example_input=_example,
)


def loss_divergence(record: RunRecord) -> list[Finding]:
    """TRN002: the training loss ends far above its minimum (or an order of magnitude above its
    start), and stays there."""
    full = train_loss(record)
    if full is None or centred_on_zero(full):  # no floor at zero: a rise is not a divergence
        return []
    found = _rose_from_minimum(full) or _exploded(full, _first_step_loss(record, full))
    return [found] if found is not None else []


RULES: tuple[Rule, ...] = (loss_divergence,)


def _first_step_loss(record: RunRecord, c: Curve) -> float | None:
    """The loss of the first logged step when `c` is per epoch: epoch 0's mean already holds
    whatever happened during epoch 0 (an explosion in its first batches included); the
    first step's loss is where training started."""
    import math

    if c.per != "epoch":
        return None
    steps = curve(record, c.name, prefer="step")
    if steps is None or steps.per != "step" or not len(steps):
        return None
    first = float(steps.y[0])
    return first if math.isfinite(first) and first > 0 else None


def _rose_from_minimum(full: Curve) -> Finding | None:
    """The smoothed loss ends above its minimum by its own size, half its gain and 5x its noise."""
    import numpy as np

    c = reduce(full.finite_prefix())
    n = len(c)
    if n < DIVERGENCE_MIN_POINTS:
        return None
    smooth = rolling_median(c.y, smoothing_window(n))
    k = max(2, n // 10)
    i_min = int(np.argmin(smooth))
    if i_min >= n - k:
        return None
    low = float(smooth[i_min])
    start = float(np.median(c.y[:k]))
    end = float(np.median(c.y[-k:]))
    sigma = noise_sigma(c.y)
    threshold = max(RISE_OVER_MIN * abs(low), RISE_OVER_DROP * (start - low), RISE_NOISE * sigma)
    peak = float(np.max(smooth[i_min:]))
    if end - low <= threshold or end - low < RISE_HELD * (peak - low):
        return None
    departs = i_min + int(np.argmax(smooth[i_min:] > low + threshold / 2))
    evidence: dict[str, object] = {"threshold": threshold, "noise_sigma": sigma}
    ratio = f" ({end / low:.1f}x its minimum)" if low > 0 else ""
    how = f"it fell to {low:.4g} by {at(c, i_min)}, then rose to {end:.4g} by {at(c, n - 1)}{ratio}"
    return _divergence(c, len(full), minimum=(i_min, low), departs=departs, end=end, how=how, extra=evidence)


def _exploded(full: Curve, first_step: float | None = None) -> Finding | None:
    """The last points of a positive loss all sit EXPLOSION_FACTOR x above its start (the
    first step's loss, `first_step`, when it is lower than the curve's first points)."""
    import numpy as np

    c = reduce(full.finite_prefix())
    n = len(c)
    if n < EXPLOSION_MIN_POINTS or not bool(np.all(c.y > 0)):
        return None
    k = max(2, n // 10)  # "stays high": every one of the last k points, not one spike
    start = float(np.median(c.y[: max(1, n // 10)]))
    before = first_step is not None and first_step < start
    if first_step is not None and before:
        start = first_step
    if float(np.min(c.y[-k:])) < EXPLOSION_FACTOR * start:
        return None
    i_min = 0 if before else int(np.argmin(c.y[: n - k]))
    low = start if before else float(c.y[i_min])
    departs = i_min + int(np.argmax(c.y[i_min:] >= EXPLOSION_FACTOR * start))
    end = float(np.median(c.y[-k:]))
    evidence: dict[str, object] = {
        "start_loss": start,
        "factor_over_start": end / start,
        "threshold_factor": EXPLOSION_FACTOR,
    }
    lowest = f" (lowest {low:.4g} at {at(c, i_min)})" if low < start else ""
    if before:
        lowest = " at its first step"
    how = (
        f"it started at {start:.4g}{lowest} and rose to {end:.4g} by {at(c, n - 1)} "
        f"({end / start:.3g}x its start)"
    )
    return _divergence(c, len(full), minimum=(i_min, low), departs=departs, end=end, how=how, extra=evidence)


def _divergence(
    c: Curve,
    points: int,
    *,
    minimum: tuple[int, float],
    departs: int,
    end: float,
    how: str,
    extra: dict[str, object],
) -> Finding:
    i_min, low = minimum
    evidence: dict[str, object] = {
        "metric": c.name,
        "min_loss": low,
        f"min_{c.per}": int(c.x[i_min]),
        "end_loss": end,
        f"end_{c.per}": int(c.x[-1]),
        f"departed_at_{c.per}": int(c.x[departs]),
        "rise": end - low,
        **extra,
        "points": points,
    }
    step, epoch = where(c, departs)
    return SPEC.finding(f"Loss `{c.name}` diverged: {how}", evidence=evidence, step=step, epoch=epoch)
