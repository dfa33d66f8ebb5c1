"""TRN: training dynamics, from the metrics trainmedic sees (any framework).

TRN001-TRN004 are pure, noise-robust rules over the loss curves of a `RunRecord`
(see `curves.py` for which metric is "the loss"). They are shared by `trainmedic
run`, the in-process guards and `trainmedic diagnose`, so every path reports a
diverging run the same way. Every threshold is a named constant beside its rule
(`loss`: TRN001-002, `learning`: TRN003, `validation`: TRN004) and is documented
in docs/diagnose.md; curves longer than `curves.MAX_POINTS` are judged on bucket
medians, which makes one spike or a noisy step log harmless.
"""

from __future__ import annotations

from trainmedic.findings import FindingSpec
from trainmedic.record import Rule
from trainmedic.rules.dynamics.learning import (
    CHANCE_INFER_MAX_CLASSES,
    CHANCE_INFER_TOL,
    CHANCE_MIN_EPOCHS,
    CHANCE_MIN_STEPS,
    CHANCE_REL,
    DECREASE_NOISE,
    LOSS_FUNCTION_CHECK,
    MIN_REL_DECREASE,
    NOT_LEARNING,
    NOT_LEARNING_MIN_EPOCHS,
    NOT_LEARNING_MIN_STEPS,
    Chance,
    classes_stated,
    not_learning,
)
from trainmedic.rules.dynamics.loss import (
    DIVERGENCE_MIN_POINTS,
    EXPLOSION_FACTOR,
    EXPLOSION_MIN_POINTS,
    LOSS_DIVERGENCE,
    NONFINITE_LOSS,
    RISE_HELD,
    RISE_NOISE,
    RISE_OVER_DROP,
    RISE_OVER_MIN,
    loss_divergence,
    nonfinite_loss,
)
from trainmedic.rules.dynamics.validation import (
    OVERFIT_MIN_AFTER_TURN,
    OVERFIT_MIN_POINTS,
    OVERFIT_NOISE,
    OVERFIT_REL,
    OVERFITTING,
    TRAIN_FALL_REL,
    overfitting,
)

__all__ = [
    "CHANCE_INFER_MAX_CLASSES",
    "CHANCE_INFER_TOL",
    "CHANCE_MIN_EPOCHS",
    "CHANCE_MIN_STEPS",
    "CHANCE_REL",
    "DECREASE_NOISE",
    "DIVERGENCE_MIN_POINTS",
    "EXPLOSION_FACTOR",
    "EXPLOSION_MIN_POINTS",
    "LOSS_DIVERGENCE",
    "LOSS_FUNCTION_CHECK",
    "MIN_REL_DECREASE",
    "NONFINITE_LOSS",
    "NOT_LEARNING",
    "NOT_LEARNING_MIN_EPOCHS",
    "NOT_LEARNING_MIN_STEPS",
    "OVERFITTING",
    "OVERFIT_MIN_AFTER_TURN",
    "OVERFIT_MIN_POINTS",
    "OVERFIT_NOISE",
    "OVERFIT_REL",
    "RISE_HELD",
    "RISE_NOISE",
    "RISE_OVER_DROP",
    "RISE_OVER_MIN",
    "RULES",
    "SPECS",
    "TRAIN_FALL_REL",
    "Chance",
    "classes_stated",
    "loss_divergence",
    "nonfinite_loss",
    "not_learning",
    "overfitting",
]

SPECS: tuple[FindingSpec, ...] = (
    NONFINITE_LOSS,
    LOSS_DIVERGENCE,
    NOT_LEARNING,
    OVERFITTING,
)

RULES: tuple[Rule, ...] = (nonfinite_loss, loss_divergence, not_learning, overfitting)
