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

INPUT_BOUND = FindingSpec(
    code="TRN005",
    slug="input-bound",
    severity=Severity.WARNING,
    title="Input-bound: steps wait for data",
    what="Most of each step is spent waiting for the next batch (data-loader bottleneck); the share is given.",
    why="The accelerator idles while the input pipeline works: the run takes longer for nothing.",
    example="DataLoader(num_workers=0) with JPEG decoding: 70% of each step waits for data.",
    fix="Raise num_workers, use pin_memory and prefetching, cache decoded data, or move augmentation to the device.",
)

CANNOT_OVERFIT_BATCH = FindingSpec(
    code="TRN006",
    slug="cannot-overfit-batch",
    severity=Severity.ERROR,
    title="Cannot overfit one small batch",
    what="The tiny-batch overfit test failed: the model cannot drive the loss on one small batch near zero.",
    why="A model that cannot memorise 8 examples has a bug: it will not learn the full data set either.",
    example="Loss on a fixed batch of 8 stays at 2.2 after 200 steps.",
    fix=(
        "Check that the loss gets logits (not probabilities), the labels match the inputs, "
        "parameters are in the optimizer and require grad, and the learning rate."
    ),
)

EXPLODING_GRADIENTS = FindingSpec(
    code="TRN007",
    slug="exploding-gradients",
    severity=Severity.ERROR,
    title="Exploding gradients",
    what="The gradient norm jumped by orders of magnitude or became non-finite.",
    why="One such step can destroy the weights; the loss goes NaN soon after.",
    example="Gradient norm ~1 for 500 steps, then 3e4 at step 512.",
    fix="Clip gradients (max_grad_norm=1.0), lower the learning rate, add warm-up, check for bad batches.",
)

VANISHING_GRADIENTS = FindingSpec(
    code="TRN008",
    slug="vanishing-gradients",
    severity=Severity.WARNING,
    title="Vanishing gradients",
    what="The gradient norm of some layers stays near zero.",
    why="Those layers do not learn; deep nets with saturating activations stall this way.",
    example="A 20-layer sigmoid MLP: first-layer gradient norm 1e-9.",
    fix="Use ReLU/GELU, residual connections, normalisation layers, and a suitable initialisation.",
)

SPECS: tuple[FindingSpec, ...] = (
    NONFINITE_LOSS,
    LOSS_DIVERGENCE,
    NOT_LEARNING,
    OVERFITTING,
    INPUT_BOUND,
    CANNOT_OVERFIT_BATCH,
    EXPLODING_GRADIENTS,
    VANISHING_GRADIENTS,
)

RULES: tuple[Rule, ...] = ()
