"""TRN002 `loss-divergence`: the training loss rose far above its minimum and kept rising, or
blew up for a stretch of the run.

Collectors: whatever sends the training loss as `Epoch`/`Step`/`Metric` events (a Keras
history, the guards' sampled steps, the boosters' rounds, a TensorBoard or HF log read by
`diagnose`); `_helpers/curves.py` picks the curve. Three tests: the smoothed loss ends far
above its minimum (an additive test against the curve's noise); on runs of any length from
3 points, its last points all sit an order of magnitude above its start; or an episode, a
stretch of the run where it sat several times above its running minimum, whether or not it
came back down by the end. RUN's crash
rule asks `loss_divergence` whether a divergence explains an overflow.
"""

from __future__ import annotations

import math

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
#: TRN002, a blow-up episode that ends (or not) before the run does: the smoothed loss sits at
#: least EPISODE_FACTOR x its running minimum before, above it by RISE_OVER_DROP x what it had
#: gained from its start by then, and by a factor of RISE_NOISE x the point-to-point scatter of
#: log(loss) (a loss that scatters by a factor from batch to batch is not blowing up) ...
EPISODE_FACTOR = 2.0
#: ... for at least EPISODE_SHARE of the run's points and EPISODE_MIN_POINTS of them. The
#: smoothing (a rolling median of at least EPISODE_WINDOW points) removes spikes of one or two
#: points that recover at once: a spike is not an episode.
EPISODE_SHARE = 0.05
EPISODE_MIN_POINTS = 3
EPISODE_WINDOW = 5


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
        "from 3 loss points, its last points all sit 10x above where it started; or it blew up "
        "for a stretch of the run (2x its best so far or more, for at least 5% of the run, not a "
        "spike of one or two steps) and came back down, as a learning rate far too high does "
        "under a decaying schedule. The step it left is given, and an episode's start, peak and end."
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
    found = (
        _rose_from_minimum(full)
        or _exploded(full, _first_step_loss(record, full))
        or _episode(_episode_curve(record, full))
    )
    return [found] if found is not None else []


RULES: tuple[Rule, ...] = (loss_divergence,)


def _first_step_loss(record: RunRecord, c: Curve) -> float | None:
    """The loss of the first logged step when `c` is per epoch: epoch 0's mean already holds
    whatever happened during epoch 0 (an explosion in its first batches included); the
    first step's loss is where training started."""
    if c.per != "epoch":
        return None
    steps = curve(record, c.name, prefer="step")
    if steps is None or steps.per != "step" or not len(steps):
        return None
    first = float(steps.y[0])
    return first if math.isfinite(first) and first > 0 else None


def _episode_curve(record: RunRecord, c: Curve) -> Curve:
    """The step-level curve of `c`'s loss where there is one: it starts at the last optimizer
    handover (a student's training after its teacher's, the next layer of a layer-wise run),
    whose loss starts high again and is no blow-up; an epoch curve runs through it."""
    if c.per == "step":
        return c
    steps = curve(record, c.name, prefer="step")
    return steps if steps is not None and steps.per == "step" and len(steps) else c


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


def _episode(full: Curve) -> Finding | None:
    """A stretch of the run where the smoothed loss sat EPISODE_FACTOR x above its best so far.

    A learning rate far too high blows the loss up; a schedule that lowers the rate later
    (cosine, step decay) brings it back down, and the run ends calmly, often never as low as
    a healthy one. The rise over the running minimum (not the end of the run) is what tells
    it: several times the best loss reached before, above the point-to-point noise, held for
    a share of the run. Positive losses only (a ratio to a minimum needs a floor at zero).
    """
    import numpy as np

    c = reduce(full.finite_prefix())
    n = len(c)
    if n < DIVERGENCE_MIN_POINTS or not bool(np.all(c.y > 0)):
        return None
    smooth = rolling_median(c.y, max(EPISODE_WINDOW, smoothing_window(n)))
    best = np.minimum.accumulate(smooth)
    before = np.concatenate([[smooth[0]], best[:-1]])  # the running minimum before each point
    start = float(np.median(c.y[: max(2, n // 10)]))
    gained = np.maximum(start - before, 0.0)  # what the loss had gained from its start by then
    rise = np.maximum((EPISODE_FACTOR - 1) * before, RISE_OVER_DROP * gained)
    # Noise as a factor: the point-to-point scatter of log(loss). A loss that scatters by 3x from
    # batch to batch (per-batch losses near zero, RL objectives) sits 2x above its best by chance.
    log_sigma = noise_sigma(np.log(c.y))
    above = (smooth - before >= rise) & (np.log(smooth / before) >= RISE_NOISE * log_sigma)
    hold = max(EPISODE_MIN_POINTS, math.ceil(EPISODE_SHARE * n))
    for first, last in _stretches(above):
        if last - first + 1 < hold:
            continue
        low = float(before[first])
        peak = first + int(np.argmax(c.y[first : last + 1]))
        recovered = last < n - 1
        evidence: dict[str, object] = {
            f"episode_start_{c.per}": int(c.x[first]),
            f"peak_{c.per}": int(c.x[peak]),
            f"episode_end_{c.per}": int(c.x[last]),
            "peak_loss": float(c.y[peak]),
            "min_before": low,
            "factor_over_min": float(c.y[peak]) / low,
            "share_of_run": (last - first + 1) / n,
            "rise": float(c.y[peak]) - low,
            "recovered": recovered,
            "threshold_factor": EPISODE_FACTOR,
        }
        end = float(np.median(c.y[-max(2, n // 10) :]))
        then = f", then came back to {end:.4g} by {at(c, n - 1)}" if recovered else ""
        how = (
            f"from its best of {low:.4g} it blew up to {float(c.y[peak]):.4g} at {at(c, peak)} "
            f"({float(c.y[peak]) / low:.3g}x) and stayed above {EPISODE_FACTOR:g}x its best from "
            f"{at(c, first)} to {at(c, last)} ({(last - first + 1) / n:.0%} of the run){then}"
        )
        i_min = int(np.argmin(smooth[: first + 1]))
        return _divergence(
            c, len(full), minimum=(i_min, low), departs=first, end=end, how=how, extra=evidence
        )
    return None


def _stretches(mask: object) -> list[tuple[int, int]]:
    """(first, last) index of each run of True in a boolean array."""
    import numpy as np

    flags = np.asarray(mask, dtype=np.int8)
    edges = np.diff(np.concatenate([[0], flags, [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    return [(int(a), int(b)) for a, b in zip(starts, ends, strict=True)]


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
