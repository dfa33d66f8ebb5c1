"""TRN003 `not-learning`: the training loss does not decrease beyond noise, or sits at chance.

Collectors: whatever sends the training loss as `Epoch`/`Step`/`Metric` events (a Keras
history, the guards' sampled steps, a TensorBoard or HF log read by `diagnose`);
`evidence/curves.py` picks the curve. Flat: the loss never got below its start by more than
noise. At chance: a classifier's loss stays at ln K, the loss of predicting the same
distribution for every input; K comes from a `loss_function` observation (`LOSS_FUNCTION_OBSERVATION`,
sent by the Keras instrumentation and the PyTorch guard's forward hook with the classes and
where they came from), or is inferred where it cannot be a coincidence. At the mean: a
regression's loss stays at (or above) the loss of predicting its targets' mean, measured by the
PyTorch guard beside the loss itself on the sampled steps of a mean squared error
(`MEAN_PREDICTION_OBSERVATION`, `torch/_losses.py`): over the second half of the run, the batches'
squared error sums to at least (1 - MEAN_REL) x what their targets' variance sums to, and the
loss no longer falls. A model that has not even learned the mean has learned nothing either.

A loss that takes both signs again and again is not judged at all: its decrease does not
mean learning. An error measure (cross-entropy, squared error) is never negative; a
log-density of continuous data crosses zero once, on its way down. A policy-gradient
surrogate (-log pi x a normalised return, REINFORCE's or PPO's) or a critic's estimate is
centred by construction: it changes sign from batch to batch, its size follows the episodes'
length rather than the fit, and a REINFORCE run that solves its task ends with a loss above
its start. `centred_on_zero` recognises it from the first half of the curve; `_both_signs`
from the whole curve (a surrogate that starts mostly positive on short early episodes and
scatters around zero later): at least `BOTH_SIGNS_CHANGES` sign changes, the less frequent
sign on at least `BOTH_SIGNS_SHARE` of the points (a log-density that crosses zero on its
way down changes sign a few times around the crossing, then stays below), and the median
within the interquartile range of zero (a flat loss at 0.3 that dips below zero now and then
sits many of its spreads away from zero: it is judged). A surrogate can also be mostly of
one sign for a whole run (REINFORCE on CartPole: positive on most episodes, its scatter as
large as its level): it still goes over to the other sign again and again (a log-density
crosses zero once and stays), and zero lies within SURROGATE_NOISE x its
point-to-point noise of its median, so its level cannot be told from zero; what shows that
such a run learns is its return, not its loss. An error measure is never negative: none of
this touches a cross-entropy or a squared error. A loss flat near zero that takes both signs
goes unjudged: a miss, never a false warning on a policy-gradient run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainmedic.events import Epoch, Event
from trainmedic.evidence.curves import (
    Curve,
    centred_on_zero,
    curve,
    noise_sigma,
    reduce,
    rolling_median,
    smoothing_window,
    train_loss,
)
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord

if TYPE_CHECKING:
    from trainmedic.evidence.curves import FloatArray

# -- thresholds (documented in docs/diagnose.md) ---------------------------------------------
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
LOSS_FUNCTION_OBSERVATION = "loss_function"
#: The observation that gives a squared-error loss its yardstick, one per block of sampled steps:
#: {"loss": "mse", "first_step", "last_step", "batches", "rows", "loss_sum",
#: "mean_prediction_sum"}: the batches' squared errors and their targets' variances, summed.
MEAN_PREDICTION_OBSERVATION = "mean_prediction"
#: TRN003, at the mean: over the blocks of the second half of the run (at least MEAN_MIN_BATCHES
#: batches), the squared error is at least (1 - MEAN_REL) x the loss of predicting the targets'
#: mean: the model explains at most 5 % of their variance (R^2 <= 0.05), as chance level's
#: CHANCE_REL does for a classifier. No upper bound: a loss that no longer falls above the
#: mean's loss has not even learned the constant (a rising one is TRN002's, and `_at_mean`
#: leaves a loss that ends well above its best alone). MEAN_REL above it, the message says "at".
MEAN_REL = 0.05
MEAN_MIN_BATCHES = 3
MEAN_SOURCE = "the targets' variance, from the squared error's autograd graph on sampled steps"
#: TRN003: the best level must undercut the start by MIN_REL_DECREASE x |start| and
#: DECREASE_NOISE x noise; less than that is "no decrease beyond noise".
MIN_REL_DECREASE = 0.02
DECREASE_NOISE = 2.0
#: TRN003: a positive loss whose first EARLY_POINTS logged points sit at EARLY_DROP x its best
#: level or more has learned, however early (halving a loss is no noise).
EARLY_POINTS = 3
EARLY_DROP = 2.0
#: A loss that takes both signs (see the module's docstring): this many sign changes over the
#: whole curve, the less frequent sign on this share of the points.
BOTH_SIGNS_CHANGES = 6
BOTH_SIGNS_SHARE = 0.15
#: A loss mostly of one sign (see the module's docstring): this many separate excursions to the
#: other sign after its first point of the usual one, and the median within this many noise sigmas of zero (the flat-loss test's
#: own DECREASE_NOISE: a level that close to zero is not told apart from it).
SURROGATE_OTHER_SIGN = 2
SURROGATE_NOISE = DECREASE_NOISE


def _example() -> list[Event]:
    """Loss stays at 2.30 (= ln 10) for 20 epochs on a 10-class problem."""
    return [
        Epoch(t=float(i), pid=100, epoch=i, metrics={"loss": 2.3026 + (0.001 if i % 2 else -0.001)})
        for i in range(20)
    ]


SPEC = FindingSpec(
    code="TRN003",
    slug="not-learning",
    severity=Severity.WARNING,
    title="Training loss is not decreasing",
    what=(
        "The training loss never got below its starting level by more than 2% and 2x its noise "
        "(judged over at least 5 epochs or 20 logged steps), or it sits at chance level, ln K for "
        "a classifier of K classes, and never got below it (from 3 epochs or 8 logged steps); the "
        "message names the chance level and where K came from. For a mean squared error under the "
        "PyTorch guard, chance is the loss of predicting the targets' mean (their variance, "
        "measured on sampled batches): over the second half of the run the loss stays above "
        "95% of it (R^2 <= 0.05, a model that has not even learned the mean included) and no "
        "longer falls."
    ),
    why="Compute is spent with no progress: a bug in the loop, a learning rate far off, or frozen weights.",
    example="Loss stays at 2.30 (= ln 10) for 20 epochs on a 10-class problem.",
    fix="Run the tiny-batch overfit test (trainmedic.torch.overfit_batch); check that the optimizer "
    "holds the parameters, the labels match the inputs, and the learning rate.",
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def not_learning(record: RunRecord) -> list[Finding]:
    """TRN003: the training loss never got below its starting level, or below the chance level
    of its classes, by more than noise."""
    full = train_loss(record)
    if full is None or centred_on_zero(full) or _both_signs(full):  # its level says nothing of the fit
        return []
    found = _flat(record, full) or _at_chance(record, full) or _at_mean(record, full)
    return [found] if found is not None else []


RULES: tuple[Rule, ...] = (not_learning,)
#: A DPO-family loss at its chance value is TRN014's, which knows the loss (ln 2 there is no
#: classifier's chance) and names the cause (identical pairs, beta 0, the reference).
EXPLAINED_BY = ("TRN014",)


def _both_signs(c: Curve) -> bool:
    """The loss changes sign again and again over its whole curve, each sign on a good share
    of the points, its median within its interquartile range of zero: a surrogate, not a
    distance to a target (see the module's docstring)."""
    import numpy as np

    y = reduce(c).y
    y = y[np.isfinite(y) & (y != 0)]
    if len(y) < BOTH_SIGNS_CHANGES:
        return False
    negative = float(np.mean(y < 0))
    changes = int(np.count_nonzero(np.diff(np.sign(y))))
    q1, middle, q3 = (float(v) for v in np.percentile(y, [25, 50, 75]))
    if (
        changes >= BOTH_SIGNS_CHANGES
        and min(negative, 1.0 - negative) >= BOTH_SIGNS_SHARE
        and abs(middle) <= q3 - q1
    ):
        return True
    return _within_noise_of_zero(y, middle)


def _within_noise_of_zero(y: FloatArray, middle: float) -> bool:
    """Mostly one sign, the other again and again after its first, the median within
    SURROGATE_NOISE x the noise of zero (see the module's docstring)."""
    import numpy as np

    minority = (y < 0) if middle >= 0 else (y > 0)
    after = minority[int(np.argmax(~minority)) :]  # from the first point of the usual sign on
    excursions = int(np.count_nonzero(after[1:] & ~after[:-1])) + int(after[0])
    return excursions >= SURROGATE_OTHER_SIGN and abs(middle) <= SURROGATE_NOISE * noise_sigma(y)


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
    sigma = noise_sigma(c.y, c.source)
    threshold = max(MIN_REL_DECREASE * abs(start), DECREASE_NOISE * sigma)
    if start - best >= threshold or end - start > threshold:  # it learned, or it is diverging (TRN002)
        return None
    if _converged_early(c, best, threshold):
        return None
    chance = _chance(record, end, sigma)
    far = chance is not None and abs(end - chance.level) > max(threshold, CHANCE_REL * chance.level)
    if chance is not None and chance.classes is not None and far:
        chance = None  # flat, but somewhere else than chance (a regression's is judged by its ratio)
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

    c = _level_curve(record, full)
    if c is None:
        return None
    n = len(c)
    n_min = CHANCE_MIN_EPOCHS if c.per == "epoch" else CHANCE_MIN_STEPS
    k = max(2, n // 10)
    start = float(np.median(c.y[:k]))
    end = float(np.median(c.y[-k:]))
    best = _best(c)
    sigma = noise_sigma(c.y, c.source)
    chance = _chance(record, end, sigma)
    if chance is None or chance.classes is None:  # a regression's yardstick: `_at_mean`
        return None
    threshold = max(MIN_REL_DECREASE * chance.level, min(DECREASE_NOISE * sigma, CHANCE_REL * chance.level))
    if best < chance.level - threshold or not _sits_at(c.y, chance.level, threshold, n_min):
        return None
    return _not_learning(
        c, full, start=start, best=best, end=end, threshold=threshold, sigma=sigma, chance=chance
    )


def _at_mean(record: RunRecord, full: Curve) -> Finding | None:
    """A regression's loss sits at the loss of predicting its targets' mean.

    The sampled batches say where the loss is against that yardstick (`mean_prediction`); the
    curve says it no longer falls: over its second half, the first quarter's level is not above
    the last quarter's by the flat-loss threshold. A model that learns slowly is still falling.
    """
    import numpy as np

    mean = _mean_prediction(record)
    if mean is None:
        return None
    c = _level_curve(record, full)
    if c is None:
        return None
    n = len(c)
    k = max(1 if c.per == "epoch" else 2, n // 10)
    start = float(np.median(c.y[:k]))
    end = float(np.median(c.y[-k:]))
    best, sigma = _best(c), noise_sigma(c.y, c.source)
    threshold = max(MIN_REL_DECREASE * abs(end), min(DECREASE_NOISE * sigma, CHANCE_REL * abs(end)))
    half = c.y[n // 2 :]
    quarter = max(1, len(half) // 4)
    if float(np.median(half[:quarter])) - float(np.median(half[-quarter:])) >= threshold:
        return None  # still falling
    if best < end * (1 - MEAN_REL) - threshold:
        return None  # it was well below where it ends: it got worse, it did not stay
    chance = Chance(mean.level, None, MEAN_SOURCE, mean)
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


def _level_curve(record: RunRecord, full: Curve) -> Curve | None:
    """The curve whose level is compared with a yardstick: epoch means where there are enough
    epochs, else the step curve; None when it is too short to say where it sits."""
    c = _epoch_means(full.finite_prefix(), CHANCE_MIN_EPOCHS) or reduce(full.finite_prefix())
    if c.per == "epoch" and len(c) < CHANCE_MIN_EPOCHS:
        steps = curve(record, full.name, prefer="step")
        if steps is not None and steps.per == "step":
            c = reduce(steps.finite_prefix())
    return c if len(c) >= (CHANCE_MIN_EPOCHS if c.per == "epoch" else CHANCE_MIN_STEPS) else None


def _converged_early(c: Curve, best: float, threshold: float) -> bool:
    """The first logged points are at least EARLY_DROP x the best level, beyond noise: the
    model learned within the first tenth of the run (a fast loop logs tens of thousands of
    steps after a linear model has converged) and the start's median hides it. A loss that
    only sits at its chance level or its targets' variance is still judged by those checks."""
    import numpy as np

    early = float(np.median(c.y[:EARLY_POINTS]))
    return best > 0 and early >= EARLY_DROP * best and early - best >= threshold


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
    if chance is not None and chance.mean is not None:
        mean = chance.mean
        evidence.update(
            mean_prediction_loss=mean.level,
            squared_error=mean.error,
            loss_over_mean_prediction=mean.ratio,
            sampled_batches=mean.batches,
            sampled_rows=mean.rows,
            yardstick_from=chance.source,
        )
        at = mean.ratio <= 1 + MEAN_REL
        where, verdict = (
            ("at", "predicts nothing of its targets from its inputs")
            if at
            else ("above", "has not even learned their mean")
        )
        message = (
            f"Loss `{c.name}` stayed {where} the loss of predicting the targets' mean over {span}: last "
            f"{end:.4g}, best {best:.4g}. On {mean.batches} sampled batches of its second half "
            f"({mean.rows:,} rows) the squared error is {mean.error:.4g}, and predicting their mean "
            f"costs {mean.level:.4g} (their variance): {mean.ratio:.3g}x that. The model {verdict}"
        )
    elif chance is not None:
        evidence.update(chance_level=chance.level, classes=chance.classes, classes_from=chance.source)
        message = (
            f"Loss `{c.name}` stayed at chance level over {span}: last {end:.4g}, best {best:.4g}, "
            f"chance ln {chance.classes} = {chance.level:.4g} for {chance.classes} classes "
            f"({chance.source}); the model predicts the same distribution for every input"
        )
    return SPEC.finding(message, evidence=evidence)


@dataclass(frozen=True, slots=True)
class MeanPrediction:
    """On the sampled batches of the second half of the run: the mean squared error, the loss of
    predicting the targets' mean (their variance), and the one over the other."""

    error: float
    level: float
    batches: int
    rows: int

    @property
    def ratio(self) -> float:
        return self.error / self.level


@dataclass(frozen=True, slots=True)
class Chance:
    """The loss of a model that knows nothing about its inputs: ln K for a classifier of K
    classes; for a regression (`classes` None, `mean` given) the loss of predicting its targets'
    mean, in the units of the squared error the guard measured."""

    level: float
    classes: int | None
    source: str
    mean: MeanPrediction | None = None


def _mean_prediction(record: RunRecord) -> MeanPrediction | None:
    """The `mean_prediction` blocks ending in the second half of their steps, every rank's summed,
    when the loss there is no more than MEAN_REL below the mean's loss."""
    blocks = [o.data for o in record.guard_observations if o.check == MEAN_PREDICTION_OBSERVATION]
    ends = [b.get("last_step") for b in blocks]
    if not blocks or not all(isinstance(e, int) for e in ends):
        return None
    last = max(int(e) for e in ends)  # type: ignore[arg-type]
    tail = [b for b in blocks if int(b["last_step"]) > last / 2]
    batches = sum(int(b.get("batches", 0)) for b in tail)
    rows = sum(int(b.get("rows", 0)) for b in tail)
    errors = sum(float(b.get("loss_sum", 0.0)) for b in tail)
    means = sum(float(b.get("mean_prediction_sum", 0.0)) for b in tail)
    if batches < MEAN_MIN_BATCHES or not means > 0:
        return None
    mean = MeanPrediction(errors / batches, means / batches, batches, rows)
    return mean if mean.ratio >= 1 - MEAN_REL else None


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
    mean = _mean_prediction(record)
    if mean is not None:
        return Chance(mean.level, None, MEAN_SOURCE, mean)
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
        if obs.check != LOSS_FUNCTION_OBSERVATION:
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
