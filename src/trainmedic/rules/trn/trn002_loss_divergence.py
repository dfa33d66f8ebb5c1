"""TRN002 `loss-divergence`: the training loss rose far above its minimum and kept rising, or
blew up for a sustained stretch and came back down.

Collectors: whatever sends the training loss as `Epoch`/`Step`/`Metric` events (a Keras
history, the guards' sampled steps, the boosters' rounds, a TensorBoard or HF log read by
`diagnose`); `evidence/curves.py` picks the curve. Four tests: the smoothed loss ends far
above its minimum (an additive test against the curve's noise); on runs of any length from 3
points, its last points all sit an order of magnitude above its start; a blow-up episode
that recovered (`_episode`), as a learning rate far too high gives under a decaying schedule;
or a blow-up between two points that the every-step record behind them shows
(`_between_points`, `_helpers/windows.py`).
RUN's crash rule asks `loss_divergence` whether a divergence explains an overflow.
"""

from __future__ import annotations

import math

from trainmedic.events import Event, Step
from trainmedic.evidence.curves import (
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
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.windows import Window, least_above, windows

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
#: TRN002, a blow-up episode that recovered (`_episode`), on the step curve of the last
#: training: the smoothed loss (a rolling median of EPISODE_WINDOW points or a tenth of the
#: curve, whichever is more: a spike of one or two points is no episode) sits at least
#: EPISODE_FACTOR x its best level before the episode, and RISE_NOISE x the point-to-point
#: scatter of log(loss) above it ...
EPISODE_FACTOR = 2.0
EPISODE_WINDOW = 5
#: ... for at least EPISODE_MIN_POINTS of its points and EPISODE_SHARE of the run ...
EPISODE_MIN_POINTS = 5
EPISODE_SHARE = 0.05
#: ... its peak at least EPISODE_OVER_START x the loss the run started at (its first point: the
#: untrained model's loss; the margin covers that point's batch-to-batch scatter). A learning
#: rate far too high throws the model beyond where random weights put it; a new model trained
#: in the same process, or a running mean that restarts each epoch, starts again at most at
#: that level ...
EPISODE_OVER_START = 1.25
#: ... and then comes back below EPISODE_FACTOR x that best for EPISODE_MIN_POINTS points
#: before the run ends (an episode that never ends is the other tests' case), on curves of at
#: least EPISODE_MIN_RUN points.
EPISODE_MIN_RUN = 20
#: TRN002, a blow-up between two points of the curve (`_between_points`): where the points are
#: windows of steps whose every loss was counted (the PyTorch guard's `Step.window`), a window's
#: highest loss sits EPISODE_FACTOR x the best window mean before it and EPISODE_OVER_START x
#: the untrained model's loss (the first window's highest: its first step), and its mean and
#: maximum prove at least SPIKE_MIN_STEPS steps above EPISODE_FACTOR x that best (one or two bad
#: batches are no episode: a noisy loss has them) ...
SPIKE_MIN_STEPS = 3
#: ... and the RECOVER_POINTS window means after it are back below EPISODE_FACTOR x that best
#: (a blow-up that does not come back is the other tests' case). "Above" also means above the
#: median of the earlier windows' highest losses (from SPIKE_HISTORY points on): where batches
#: differ by nature (one store or one domain a batch), every window has batches far above its
#: mean, and only a loss beyond what ordinary windows reached is a blow-up.
RECOVER_POINTS = 2
SPIKE_HISTORY = 3


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
        "and came back down: 2x its best so far and 1.25x its starting loss or more, for at least "
        "5 points and 5% of the run (a spike of one or two steps is none), as a learning rate "
        "far too high does under a decaying schedule; or, where every step's loss was counted "
        "between two points (the PyTorch guard's windows), a blow-up that those points average "
        "away: a window's highest loss 2x the best mean before it, above the earlier windows' usual "
        "highest and 1.25x the starting loss, at least 3 steps above both, and the next 2 points "
        "back below 2x that best. The step it "
        "left is given, and an episode's start, peak and end."
    ),
    why="The optimiser has left the region it was converging to; more steps make it worse.",
    example="Loss falls to 0.4 by step 300, then climbs steadily to 5.0 by step 600.",
    fix="Lower the learning rate (or its peak), add warm-up and gradient clipping.",
    decided_in=("run events", "torch guard"),
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
        or _episode(episode_curve := _episode_curve(record, full))
        or _between_points(
            episode_curve.name, windows(record, episode_curve.name) if episode_curve.per == "step" else []
        )
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
    """The curve an episode is looked for on: the step curve of the last training where there
    is one (an epoch curve averages an episode of a few hundred steps away).

    A training starts again where a `TrainingPlan` says so (each Keras `fit`): a model trained
    after another in the same process starts at an untrained loss, and the guard's step numbers
    go on from the last training's. The optimizer handovers are cut out by `curve` itself.
    """
    plans = [p.t for p in record.plans]
    if len(plans) > 0 and any(s.t < max(plans) for s in record.steps):
        since = max(plans)
        record = RunRecord.of([e for e in record.events if not isinstance(e, Step) or e.t >= since])
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
    """A stretch where the smoothed loss blew up far above its best before, then came back.

    A learning rate far too high blows the loss up; a schedule that lowers the rate later
    (cosine, step decay) brings it back down, and the run ends calmly, often never as low as a
    healthy one. A run whose loss turns non-finite is TRN001's (the rise before a NaN is part of
    that story), and an episode that lasts to the end of the run is the other tests'.
    """
    import numpy as np

    if not bool(np.all(np.isfinite(full.y))):
        return None
    c = reduce(full)
    n = len(c)
    if n < EPISODE_MIN_RUN or not bool(np.all(c.y > 0)):
        return None
    smooth = rolling_median(c.y, max(EPISODE_WINDOW, smoothing_window(n)))
    before = np.concatenate([[smooth[0]], np.minimum.accumulate(smooth)[:-1]])  # best before each point
    # Noise as a factor: the point-to-point scatter of log(loss). A loss that scatters by 3x
    # from batch to batch sits 2x above its best by chance.
    log_noise = noise_sigma(np.log(c.y))
    high = (smooth >= EPISODE_FACTOR * before) & (np.log(smooth / before) >= RISE_NOISE * log_noise)
    untrained = float(c.y[0])
    hold = max(EPISODE_MIN_POINTS, math.ceil(EPISODE_SHARE * n))
    for first, last in _stretches(high):
        low = float(before[first])
        back = smooth[last + 1 : last + 1 + EPISODE_MIN_POINTS]
        recovered = len(back) == EPISODE_MIN_POINTS and bool(np.all(back < EPISODE_FACTOR * low))
        if last - first + 1 < hold or not recovered:
            continue
        if float(np.max(smooth[first : last + 1])) < EPISODE_OVER_START * untrained:
            continue
        peak = first + int(np.argmax(c.y[first : last + 1]))
        return _episode_finding(c, len(full), (first, peak, last), low=low, untrained=untrained)
    return None


def _between_points(name: str, ws: list[Window]) -> Finding | None:
    """A blow-up that the curve's points average away, seen in the every-step record behind them.

    A few steps at a learning rate far too high (a warm-up's peak, a bad restart, a batch of
    outliers that throws the weights off) blow the loss up and the model recovers within the
    window of one or two points: their means move by a fraction, the smoothed curve not at all.
    The window's maximum and mean still say how high it went and, at the least, for how many
    steps (`least_above`).
    """
    import numpy as np

    if len(ws) < SPIKE_HISTORY + 1 + RECOVER_POINTS or all(w.count <= 1 for w in ws):
        return None
    means = np.array([w.mean for w in ws])
    if not bool(np.all(np.isfinite(means))) or not bool(np.all(means > 0)):
        return None  # a non-finite loss is TRN001's; a loss that is not positive has no ratio
    log_noise = noise_sigma(np.log(means))
    untrained = max(ws[0].high, ws[0].mean)
    i = SPIKE_HISTORY
    while i < len(ws) - RECOVER_POINTS:
        best = float(np.min(means[:i]))
        # Above what a batch of an ordinary window reached: a loop whose batches differ by
        # nature (one store, one speaker, one domain a batch) has high batches in every window.
        ordinary = float(np.median([x.high for x in ws[1:i]]))
        limit = max(EPISODE_FACTOR * best, ordinary)
        w = ws[i]
        if (
            w.high < max(limit, EPISODE_OVER_START * untrained)
            or math.log(w.high / best) < RISE_NOISE * log_noise
        ):
            i += 1
            continue
        last = i
        while last + 1 < len(ws) and ws[last + 1].high >= limit:
            last += 1
        after = means[last + 1 : last + 1 + RECOVER_POINTS]
        high_steps = sum(least_above(x, limit) for x in ws[i : last + 1])
        back = bool(np.all(after < EPISODE_FACTOR * best))
        if len(after) == RECOVER_POINTS and back and high_steps >= SPIKE_MIN_STEPS:
            return _between_finding(
                name, ws, (i, last), best=best, limit=limit, untrained=untrained, high_steps=high_steps
            )
        i = last + 1
    return None


def _between_finding(
    name: str,
    ws: list[Window],
    span: tuple[int, int],
    *,
    best: float,
    limit: float,
    untrained: float,
    high_steps: int,
) -> Finding:
    first, last = span
    peak = max(ws[first : last + 1], key=lambda w: w.high)
    start, end = ws[first].first_step, ws[last].last_step
    final = ws[-1]
    evidence: dict[str, object] = {
        "metric": name,
        "episode_start_step": start,
        "peak_step": peak.high_step,
        "episode_end_step": end,
        "peak_loss": peak.high,
        "min_before": best,
        "factor_over_min": peak.high / best,
        "start_loss": untrained,
        "steps_above_at_least": high_steps,
        "window_means": [w.mean for w in ws[first : last + 1]],
        "end_loss": final.mean,
        "end_step": final.last_step,
        "recovered": True,
        "between_points": True,
        "threshold_factor": EPISODE_FACTOR,
        "spike_threshold": limit,
        "points": len(ws),
    }
    span_text = f"step {start}" if start == end else f"steps {start}-{end}"
    how = (
        f"between two points of its curve it blew up from its best of {best:.4g} to {peak.high:.4g} "
        f"at step {peak.high_step} ({peak.high / best:.3g}x), at least {high_steps} of "
        f"{span_text} above {limit:.4g} (every step's loss counted; the points' "
        f"means show {', '.join(f'{w.mean:.4g}' for w in ws[first : last + 1])}); it came back to "
        f"{final.mean:.4g} by step {final.last_step}"
    )
    epoch = peak.epoch + 1 if peak.epoch is not None else None
    return SPEC.finding(f"Loss `{name}` diverged: {how}", evidence=evidence, step=start, epoch=epoch)


def _episode_finding(
    c: Curve, points: int, span: tuple[int, int, int], *, low: float, untrained: float
) -> Finding:
    import numpy as np

    first, peak, last = span
    top = float(c.y[peak])
    n = len(c)
    end = float(np.median(c.y[-max(2, n // 10) :]))
    share = (last - first + 1) / n
    evidence: dict[str, object] = {
        f"episode_start_{c.per}": int(c.x[first]),
        f"peak_{c.per}": int(c.x[peak]),
        f"episode_end_{c.per}": int(c.x[last]),
        "peak_loss": top,
        "min_before": low,
        "factor_over_min": top / low,
        "start_loss": untrained,
        "share_of_run": share,
        "rise": top - low,
        "recovered": True,
        "threshold_factor": EPISODE_FACTOR,
    }
    how = (
        f"from its best of {low:.4g} it blew up to {top:.4g} ({top / low:.3g}x) and stayed above "
        f"{EPISODE_FACTOR:g}x that best from {at(c, first)} to {at(c, last)} ({share:.0%} of the "
        f"run), peaking at {at(c, peak)}; it came back to {end:.4g} by {at(c, n - 1)}"
    )
    i_min = int(np.argmin(c.y[: first + 1]))
    return _divergence(c, points, minimum=(i_min, low), departs=first, end=end, how=how, extra=evidence)


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
