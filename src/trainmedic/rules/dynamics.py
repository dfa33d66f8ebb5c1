"""TRN: training dynamics, from the metrics trainmedic sees (any framework).

TRN001-TRN004 are pure, noise-robust rules over the loss curves of a `RunRecord`
(see `curves.py` for which metric is "the loss"). They are shared by `trainmedic
run`, the in-process guards and `trainmedic diagnose`, so every path reports a
diverging run the same way. Every threshold is a named constant below and is
documented in docs/diagnose.md; curves longer than `curves.MAX_POINTS` are judged
on bucket medians, which makes one spike or a noisy step log harmless.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules.curves import (
    Curve,
    curve,
    loss_curves,
    noise_sigma,
    reduce,
    rolling_median,
    smoothing_window,
    train_loss,
)

if TYPE_CHECKING:
    from trainmedic.rules.curves import FloatArray

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
#: TRN003 needs this many points (epochs / logged steps) before judging.
NOT_LEARNING_MIN_EPOCHS = 5
NOT_LEARNING_MIN_STEPS = 20
#: TRN003, chance level: a classification loss at ln K (K classes) is judged over fewer points
#: than a flat loss of unknown meaning (the level itself says "predicts the same distribution
#: for every input"): this many epochs, or logged steps (one per 10 steps under the guard).
CHANCE_MIN_EPOCHS = 3
CHANCE_MIN_STEPS = 8
#: TRN003: the level counts as chance within the flat-loss threshold, at most CHANCE_REL x ln K
#: (5 % below ln 10 is 2.19: a model there has learned something about its inputs).
CHANCE_REL = 0.05
#: TRN003: chance inferred without a stated class count: K up to this, level and noise within
#: CHANCE_INFER_TOL x ln K.
CHANCE_INFER_MAX_CLASSES = 10
CHANCE_INFER_TOL = 0.005
#: The observation that states the classes of the training loss: {"classes": K, "source": ...}.
LOSS_FUNCTION_CHECK = "loss_function"
#: TRN003: the best level must undercut the start by MIN_REL_DECREASE x |start| and
#: DECREASE_NOISE x noise; less than that is "no decrease beyond noise".
MIN_REL_DECREASE = 0.02
DECREASE_NOISE = 2.0
#: TRN004 needs this many validation points, and this many after the turn.
OVERFIT_MIN_POINTS = 5
OVERFIT_MIN_AFTER_TURN = 2
#: TRN004: validation must rise above its minimum by OVERFIT_REL x |minimum| and
#: OVERFIT_NOISE x its noise, while training loss falls by TRAIN_FALL_REL x its level.
OVERFIT_REL = 0.10
OVERFIT_NOISE = 3.0
TRAIN_FALL_REL = 0.01

NONFINITE_LOSS = FindingSpec(
    code="TRN001",
    slug="nonfinite-loss",
    severity=Severity.ERROR,
    title="Loss became NaN or Inf",
    what=(
        "The loss (or a metric used as the loss, training or validation) became NaN or Inf; the "
        "first step and epoch are given, with the last finite value before it."
    ),
    why=(
        "Every update after that step is garbage: the weights are NaN and the run is lost. Keras "
        "and the HF Trainer keep going and log NaN for every later epoch unless told to stop."
    ),
    example=(
        "A learning rate of 10 on an MLP: loss 2.3, 8.1, 1e12, inf, nan. `trainmedic diagnose "
        "history.json` names the epoch; on a TensorBoard log of every step, the step."
    ),
    fix=(
        "Lower the learning rate or add warm-up, clip gradients, check the inputs of that "
        "batch for NaN/Inf, use bf16 instead of fp16 or a loss scaler."
    ),
)

LOSS_DIVERGENCE = FindingSpec(
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
)

NOT_LEARNING = FindingSpec(
    code="TRN003",
    slug="not-learning",
    severity=Severity.WARNING,
    title="Training loss is not decreasing",
    what=(
        "The training loss never got below its starting level by more than 2% and 2x its noise "
        "(judged over at least 5 epochs or 20 logged steps), or it sits at chance level, ln K for "
        "a classifier of K classes, and never got below it (from 3 epochs or 8 logged steps); the "
        "message names the chance level and where K came from."
    ),
    why="Compute is spent with no progress: a bug in the loop, a learning rate far off, or frozen weights.",
    example="Loss stays at 2.30 (= ln 10) for 20 epochs on a 10-class problem.",
    fix=(
        "Run the tiny-batch overfit test (trainmedic.torch.overfit_batch); check that the "
        "optimizer holds the parameters, the labels match the inputs, and the learning rate."
    ),
)

OVERFITTING = FindingSpec(
    code="TRN004",
    slug="overfitting",
    severity=Severity.WARNING,
    title="Overfitting: validation loss rises while training loss falls",
    what=(
        "Validation loss rises (by more than 10% and 3x its noise) after its minimum while the "
        "training loss keeps falling: a growing gap. The turning epoch is given."
    ),
    why="Every epoch after the turn makes the model worse on unseen data.",
    example="val_loss 0.52 at epoch 6, 0.61 at 10, 0.80 at 15; loss 0.30 -> 0.05.",
    fix=(
        "Keep the checkpoint of the turning epoch (early stopping on val_loss), add "
        "regularisation or data augmentation, or get more data."
    ),
)

SPECS: tuple[FindingSpec, ...] = (
    NONFINITE_LOSS,
    LOSS_DIVERGENCE,
    NOT_LEARNING,
    OVERFITTING,
)


# -- rules -----------------------------------------------------------------------------------


def nonfinite_loss(record: RunRecord) -> list[Finding]:
    """TRN001: the first NaN/Inf of any loss curve (training curves win ties; steps beat epochs)."""
    train, val = loss_curves(record, prefer="step")
    if not train and not val:
        return []
    import numpy as np

    first: tuple[float, Curve, int] | None = None
    affected: list[str] = []
    for c in train + val:
        bad = np.flatnonzero(~np.isfinite(c.y))
        if not len(bad):
            continue
        affected.append(c.name)
        i = int(bad[0])
        if first is None or c.x[i] < first[0]:
            first = (float(c.x[i]), c, i)
    if first is None:
        return []
    _, c, i = first
    step, epoch = _where(c, i)
    value = "NaN" if np.isnan(c.y[i]) else ("+Inf" if c.y[i] > 0 else "-Inf")
    evidence: dict[str, object] = {
        "metric": c.name,
        "value": value,
        c.per: int(c.x[i]) + (1 if c.per == "epoch" else 0),
        "nonfinite_points": int(np.count_nonzero(~np.isfinite(c.y))),
        "points": len(c),
        "metrics_affected": affected,
    }
    last = ""
    if i > 0:
        evidence["last_finite_value"] = float(c.y[i - 1])
        evidence[f"last_finite_{c.per}"] = int(c.x[i - 1]) + (1 if c.per == "epoch" else 0)
        last = f"; last finite value {c.y[i - 1]:.4g} at {_at(c, i - 1)}"
    if epoch is not None and c.per == "step":
        evidence["epoch"] = epoch
    message = f"Loss `{c.name}` became {value} at {_at(c, i)}{last}"
    return [NONFINITE_LOSS.finding(message, evidence=evidence, step=step, epoch=epoch)]


def loss_divergence(record: RunRecord) -> list[Finding]:
    """TRN002: the training loss ends far above its minimum (or an order of magnitude above its
    start), and stays there."""
    full = train_loss(record)
    if full is None:
        return []
    found = _rose_from_minimum(full) or _exploded(full, _first_step_loss(record, full))
    return [found] if found is not None else []


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
    how = f"it fell to {low:.4g} by {_at(c, i_min)}, then rose to {end:.4g} by {_at(c, n - 1)}{ratio}"
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
    lowest = f" (lowest {low:.4g} at {_at(c, i_min)})" if low < start else ""
    if before:
        lowest = " at its first step"
    how = (
        f"it started at {start:.4g}{lowest} and rose to {end:.4g} by {_at(c, n - 1)} "
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
    step, epoch = _where(c, departs)
    return LOSS_DIVERGENCE.finding(
        f"Loss `{c.name}` diverged: {how}", evidence=evidence, step=step, epoch=epoch
    )


def not_learning(record: RunRecord) -> list[Finding]:
    """TRN003: the training loss never got below its starting level, or below the chance level
    of its classes, by more than noise."""
    full = train_loss(record)
    if full is None:
        return []
    found = _flat(record, full) or _at_chance(record, full)
    return [found] if found is not None else []


def _flat(record: RunRecord, full: Curve) -> Finding | None:
    import numpy as np

    c = _epoch_means(full.finite_prefix(), NOT_LEARNING_MIN_EPOCHS) or reduce(full.finite_prefix())
    n = len(c)
    if n < (NOT_LEARNING_MIN_EPOCHS if c.per == "epoch" else NOT_LEARNING_MIN_STEPS):
        return None
    k = max(3 if c.per == "step" else 2, n // 10)  # a median over too few step losses is one batch's noise
    start = float(np.median(c.y[:k]))
    end = float(np.median(c.y[-k:]))
    best = _best(c)
    sigma = noise_sigma(c.y)
    threshold = max(MIN_REL_DECREASE * abs(start), DECREASE_NOISE * sigma)
    if start - best >= threshold or end - start > threshold:  # it learned, or it is diverging (TRN002)
        return None
    chance = _chance(record, end, sigma)
    if chance is not None and abs(end - chance.level) > max(threshold, CHANCE_REL * chance.level):
        chance = None  # flat, but somewhere else than chance
    return _not_learning(
        c, full, start=start, best=best, end=end, threshold=threshold, sigma=sigma, chance=chance
    )


def _at_chance(record: RunRecord, full: Curve) -> Finding | None:
    """The loss fell from its first steps to chance level and stayed there.

    A freshly initialised classifier starts a little above ln K (random logits are not
    uniform); learning the output bias brings it down to ln K within a few steps, which passes
    the test against the start. A model that never goes below ln K predicts the same
    distribution for every input: it learned nothing about the inputs.
    """
    import numpy as np

    c = _epoch_means(full.finite_prefix(), CHANCE_MIN_EPOCHS) or reduce(full.finite_prefix())
    if c.per == "epoch" and len(c) < CHANCE_MIN_EPOCHS:
        steps = curve(record, full.name, prefer="step")
        if steps is not None and steps.per == "step":
            c = reduce(steps.finite_prefix())
    n = len(c)
    n_min = CHANCE_MIN_EPOCHS if c.per == "epoch" else CHANCE_MIN_STEPS
    if n < n_min:
        return None
    k = max(2, n // 10)
    start = float(np.median(c.y[:k]))
    end = float(np.median(c.y[-k:]))
    best = _best(c)
    sigma = noise_sigma(c.y)
    chance = _chance(record, end, sigma)
    if chance is None:
        return None
    threshold = max(MIN_REL_DECREASE * chance.level, min(DECREASE_NOISE * sigma, CHANCE_REL * chance.level))
    if best < chance.level - threshold or not _sits_at(c.y, chance.level, threshold, n_min):
        return None
    return _not_learning(
        c, full, start=start, best=best, end=end, threshold=threshold, sigma=sigma, chance=chance
    )


def _sits_at(y: FloatArray, level: float, threshold: float, n_min: int) -> bool:
    """The smoothed curve's last `n_min` points or more lie within `threshold` of `level`, and
    fall by less than `threshold` over that stretch.

    A loss that passes through chance level on its way down (a slow learner, a binary loss
    that starts above ln 2) ends near it too; sitting there means staying, without a trend.
    """
    import numpy as np

    smooth = rolling_median(y, smoothing_window(len(y)))
    outside = np.flatnonzero(np.abs(smooth - level) > threshold)
    tail = smooth[int(outside[-1]) + 1 :] if len(outside) else smooth
    if len(tail) < n_min:
        return False
    quarter = max(1, len(tail) // 4)
    return float(np.median(tail[:quarter])) - float(np.median(tail[-quarter:])) < threshold


def _best(c: Curve) -> float:
    """The lowest level of the smoothed curve, over windows that lie inside it: at the padded
    ends one low first batch would be its own median."""
    import numpy as np

    n = len(c)
    half = smoothing_window(n) // 2
    smooth = rolling_median(c.y, smoothing_window(n))
    return float(np.min(smooth[half : n - half] if n > 2 * half else smooth))


def _not_learning(
    c: Curve,
    full: Curve,
    *,
    start: float,
    best: float,
    end: float,
    threshold: float,
    sigma: float,
    chance: Chance | None,
) -> Finding:
    n = len(c)
    unit = "epochs" if c.per == "epoch" else "logged steps"
    evidence: dict[str, object] = {
        "metric": c.name,
        "start_loss": start,
        "best_loss": best,
        "end_loss": end,
        "decrease": start - best,
        "threshold": threshold,
        "noise_sigma": sigma,
        c.per + "s": n if c.per == "epoch" else int(c.x[-1]),
        "points": len(full),
    }
    span = f"{len(full)} {unit}" if c.per == full.per else f"{n} epochs (means of {len(full)} logged steps)"
    if c.per == "step" and full.per == "epoch":
        span = f"{n} {unit}"
    message = (
        f"Loss `{c.name}` did not decrease beyond noise over {span}: "
        f"{start:.4g} at the start, best {best:.4g}, last {end:.4g}"
    )
    if chance is not None:
        evidence.update(chance_level=chance.level, classes=chance.classes, classes_from=chance.source)
        message = (
            f"Loss `{c.name}` stayed at chance level over {span}: last {end:.4g}, best {best:.4g}, "
            f"chance ln {chance.classes} = {chance.level:.4g} for {chance.classes} classes "
            f"({chance.source}); the model predicts the same distribution for every input"
        )
    return NOT_LEARNING.finding(message, evidence=evidence)


@dataclass(frozen=True, slots=True)
class Chance:
    """The loss of a classifier that knows nothing about its inputs: ln K for K classes."""

    level: float
    classes: int
    source: str


def _chance(record: RunRecord, level: float, sigma: float) -> Chance | None:
    """Chance level from the number of classes the events state, else inferred from the level.

    Inferred only where it cannot be a coincidence: K <= CHANCE_INFER_MAX_CLASSES (above that
    the ln K lie closer together than any tolerance), the level within CHANCE_INFER_TOL of
    ln K and the loss as still as that (a collapsed classifier's loss is ln K on every batch,
    whatever the labels; a regression loss near 2.30 scatters from batch to batch).
    """
    import math

    stated = classes_stated(record)
    if stated is not None:
        return Chance(math.log(stated[0]), stated[0], stated[1])
    if not 0 < level < math.log(CHANCE_INFER_MAX_CLASSES + 1):
        return None
    k = round(math.exp(level))
    if not 2 <= k <= CHANCE_INFER_MAX_CLASSES:
        return None
    tolerance = CHANCE_INFER_TOL * math.log(k)
    if abs(level - math.log(k)) > tolerance or sigma > tolerance:
        return None
    return Chance(math.log(k), k, "inferred: the loss sits at ln K with no batch-to-batch scatter")


def classes_stated(record: RunRecord) -> tuple[int, str] | None:
    """(classes, where from) of the training loss, from a `loss_function` observation.

    The Keras instrumentation sends one per fit (the compiled loss and the width of the output
    layer); other integrations send the same check with `classes` and `source`.
    """
    for obs in reversed(record.guard_observations):
        if obs.check != LOSS_FUNCTION_CHECK:
            continue
        classes = obs.data.get("classes")
        if isinstance(classes, int) and not isinstance(classes, bool) and classes >= 2:
            return classes, str(obs.data.get("source") or "the loss function")
    return None


def _epoch_means(c: Curve, min_epochs: int) -> Curve | None:
    """A per-step loss as one mean per epoch, when it spans enough whole epochs to judge.

    Step losses of different batches scatter by more than the 2 % a flat run moves (one
    batch is easy, the next hard), so on steps a flat run's noise dips read as progress;
    an epoch's mean averages that scatter away, as Keras' epoch loss does.
    """
    import numpy as np

    if c.per != "step" or c.epoch is None or not bool(np.all(np.isfinite(c.epoch))):
        return None
    whole = np.floor(c.epoch)
    epochs = np.unique(whole)
    if len(epochs) < min_epochs:
        return None
    means = np.array([float(np.mean(c.y[whole == e])) for e in epochs])
    return Curve(c.name, epochs, means, "epoch", epochs)


@dataclass(frozen=True, slots=True)
class _Paired:
    """Validation points with the training loss over the same stretch of training."""

    x: FloatArray
    val: FloatArray
    train: FloatArray
    per: str
    epoch: list[int | None]


def overfitting(record: RunRecord) -> list[Finding]:
    """TRN004: validation loss turned up while training loss kept falling; gives the turn."""
    train, val = loss_curves(record)
    for v in val:
        for t in train:
            paired = _pair(t.finite_prefix(), v.finite_prefix())
            if paired is None or len(paired.x) < OVERFIT_MIN_POINTS:
                continue
            found = _overfit(paired, t.name, v.name)
            return [found] if found else []
    return []


def _overfit(p: _Paired, train_name: str, val_name: str) -> Finding | None:
    import numpy as np

    n = len(p.x)
    smooth = rolling_median(p.val, 3 if n >= 7 else 1)
    turn = int(np.argmin(smooth))
    if n - 1 - turn < OVERFIT_MIN_AFTER_TURN:
        return None
    v_min = float(smooth[turn])
    v_end = float(np.median(p.val[max(turn + 1, n - 3) :]))
    t_turn = float(p.train[turn])
    t_end = float(np.median(p.train[max(turn + 1, n - 3) :]))
    sigma = noise_sigma(p.val)
    threshold = max(OVERFIT_REL * abs(v_min), OVERFIT_NOISE * sigma)
    if v_end - v_min <= threshold or t_turn - t_end <= TRAIN_FALL_REL * abs(t_turn):
        return None
    turn_epoch = p.epoch[turn]
    turn_step = int(p.x[turn]) if p.per == "step" else None
    at_turn = _label(p, turn)
    evidence: dict[str, object] = {
        "metric": val_name,
        "train_metric": train_name,
        "turn_epoch": None if turn_epoch is None else turn_epoch + 1,
        f"turn_{p.per}": int(p.x[turn]) + (1 if p.per == "epoch" else 0),
        "val_at_turn": v_min,
        "val_end": v_end,
        "train_at_turn": t_turn,
        "train_end": t_end,
        "gap_at_turn": v_min - t_turn,
        "gap_end": v_end - t_end,
        "threshold": threshold,
        "points": n,
    }
    message = (
        f"Validation loss `{val_name}` turned at {at_turn} ({v_min:.4g}) and rose to {v_end:.4g} "
        f"by {_label(p, n - 1)} while training loss `{train_name}` fell from {t_turn:.4g} to {t_end:.4g}"
    )
    fix = (
        f"Keep the checkpoint of {at_turn} (early stopping on `{val_name}` with restore_best_weights / "
        "load_best_model_at_end); add regularisation or data augmentation, or get more data."
    )
    epoch = None if turn_epoch is None else turn_epoch + 1  # 1-based, as in the message
    return OVERFITTING.finding(message, evidence=evidence, fix=fix, step=turn_step, epoch=epoch)


def _pair(t: Curve, v: Curve) -> _Paired | None:
    """Line up the training loss with each validation point (same epoch, or the steps since the last one)."""
    import numpy as np

    if v.per == "epoch" and t.per == "epoch":
        index = {int(x): float(y) for x, y in zip(t.x, t.y, strict=True)}
        keep = [i for i, x in enumerate(v.x) if int(x) in index]
        train = np.array([index[int(v.x[i])] for i in keep])
        return _Paired(v.x[keep], v.y[keep], train, "epoch", [int(v.x[i]) for i in keep])
    if v.per == "epoch" and t.epoch is not None:
        groups: dict[int, list[float]] = {}
        for e, y in zip(t.epoch, t.y, strict=True):
            if np.isfinite(e):
                groups.setdefault(int(e), []).append(float(y))
        keep = [i for i, x in enumerate(v.x) if int(x) in groups]
        train = np.array([float(np.median(groups[int(v.x[i])])) for i in keep])
        return _Paired(v.x[keep], v.y[keep], train, "epoch", [int(v.x[i]) for i in keep])
    if v.per == "step" and t.per == "step":
        bounds = np.searchsorted(t.x, v.x, side="right")
        starts = np.concatenate([[0], bounds[:-1]])
        keep = [i for i in range(len(v.x)) if bounds[i] > starts[i]]
        train = np.array([float(np.median(t.y[starts[i] : bounds[i]])) for i in keep])
        return _Paired(v.x[keep], v.y[keep], train, "step", [v.epoch_at(i) for i in keep])
    return None


def _label(p: _Paired, i: int) -> str:
    epoch = p.epoch[i]
    if p.per == "epoch" or epoch is None:
        return f"epoch {epoch + 1}" if epoch is not None else f"step {int(p.x[i])}"
    return f"step {int(p.x[i])} (epoch {epoch + 1})"


def _at(c: Curve, i: int) -> str:
    """'step 412 (epoch 3)' / 'epoch 5', epochs counted from 1 as the frameworks print them."""
    epoch = c.epoch_at(i)
    if c.per == "epoch":
        return f"epoch {int(c.x[i]) + 1}"
    return f"step {int(c.x[i])}" + (f" (epoch {epoch + 1})" if epoch is not None else "")


def _where(c: Curve, i: int) -> tuple[int | None, int | None]:
    """Finding location fields: (global step, epoch counted from 1 as the frameworks print it).

    Events keep the frameworks' 0-based epoch index; findings are read by people, who see
    "Epoch 3/12" in their logs, so a finding's epoch is 1-based like its message.
    """
    epoch = c.epoch_at(i)
    return (int(c.x[i]) if c.per == "step" else None), (None if epoch is None else epoch + 1)


RULES: tuple[Rule, ...] = (nonfinite_loss, loss_divergence, not_learning, overfitting)
