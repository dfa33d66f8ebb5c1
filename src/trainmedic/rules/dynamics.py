"""TRN: training dynamics, from the metrics trainmedic sees (any framework)."""

from __future__ import annotations

from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule

NONFINITE_LOSS = FindingSpec(
    code="TRN001",
    slug="nonfinite-loss",
    severity=Severity.ERROR,
    title="Loss became NaN or Inf",
    what="The loss (or a metric used as the loss) became NaN or Inf; the first step and epoch are given.",
    why="Every update after that step is garbage: the weights are NaN and the run is lost.",
    example="A learning rate of 10 on an MLP: loss 2.3, 8.1, 1e12, inf, nan.",
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
    what="The loss rose far above its running minimum and kept rising.",
    why="The optimiser has left the region it was converging to; more steps make it worse.",
    example="Loss falls to 0.4 by step 300, then climbs steadily to 5.0 by step 600.",
    fix="Lower the learning rate (or its peak), add warm-up and gradient clipping.",
)

NOT_LEARNING = FindingSpec(
    code="TRN003",
    slug="not-learning",
    severity=Severity.WARNING,
    title="Training loss is not decreasing",
    what="The training loss did not decrease beyond noise after warm-up.",
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
    what="Validation loss rises while training loss keeps falling (a growing gap); the turning epoch is given.",
    why="Every epoch after the turn makes the model worse on unseen data.",
    example="val_loss 0.52 at epoch 6, 0.61 at 10, 0.80 at 15; loss 0.30 -> 0.05.",
    fix=(
        "Keep the checkpoint of the turning epoch (early stopping on val_loss), add "
        "regularisation or data augmentation, or get more data."
    ),
)

EVAL_SET_IS_TRAIN = FindingSpec(
    code="TRN009",
    slug="eval-set-is-train",
    severity=Severity.ERROR,
    title="Evaluation set is (or overlaps) the training set",
    what=(
        "The evaluation/early-stopping set is, or overlaps, the training data, e.g. an "
        "XGBoost/LightGBM eval_set that contains the training rows."
    ),
    why="The stopping point and the reported score are optimistic: they measure memorisation.",
    example="xgb.fit(X_train, y_train, eval_set=[(X_train, y_train)], early_stopping_rounds=10)",
    fix="Hold out a validation split that shares no rows with the training data and stop on it.",
)

SPECS: tuple[FindingSpec, ...] = (
    NONFINITE_LOSS,
    LOSS_DIVERGENCE,
    NOT_LEARNING,
    OVERFITTING,
    EVAL_SET_IS_TRAIN,
)

RULES: tuple[Rule, ...] = ()
