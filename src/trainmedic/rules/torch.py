"""TOR: the classic PyTorch loop bugs."""

from __future__ import annotations

from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule

FROZEN_PARAMETERS = FindingSpec(
    code="TOR001",
    slug="frozen-parameters",
    severity=Severity.ERROR,
    title="Parameters never train",
    what=(
        "Parameters that the optimizer holds never receive a gradient or never change, or "
        "trainable parameters are missing from the optimizer."
    ),
    why="Part of the model silently stays at its initial weights.",
    example="optimizer = SGD(model.head.parameters())  # the backbone is never updated",
    fix="Pass model.parameters() (or every group you mean to train) to the optimizer; check requires_grad.",
)

EVAL_MODE_TRAINING = FindingSpec(
    code="TOR002",
    slug="eval-mode-training",
    severity=Severity.ERROR,
    title="Training in eval() mode",
    what="Optimizer steps are taken while the model (with dropout/batch-norm) is in eval() mode.",
    why="Dropout is off and batch-norm statistics freeze: the model trains differently than intended.",
    example="validate() calls model.eval() and the loop never calls model.train() again.",
    fix="Call model.train() at the start of every training epoch (after validation).",
)

GRADS_NOT_ZEROED = FindingSpec(
    code="TOR003",
    slug="grads-not-zeroed",
    severity=Severity.ERROR,
    title="Gradients are never zeroed",
    what="Gradients accumulate across optimizer steps without zero_grad, and no accumulation is configured.",
    why="Each step applies the sum of all past gradients: the effective learning rate grows without bound.",
    example="for x, y in loader: loss(model(x), y).backward(); opt.step()  # no opt.zero_grad()",
    fix="Call optimizer.zero_grad(set_to_none=True) once per optimizer step.",
)

SOFTMAX_INTO_CROSSENTROPY = FindingSpec(
    code="TOR004",
    slug="softmax-into-crossentropy",
    severity=Severity.WARNING,
    title="Softmax fed into CrossEntropyLoss",
    what="Probabilities or log-probabilities are fed to CrossEntropyLoss, which applies log-softmax itself.",
    why="The double softmax squashes the gradients: training is slow and accuracy lower.",
    example="loss = nn.CrossEntropyLoss()(torch.softmax(logits, dim=1), y)",
    fix="Feed raw logits to CrossEntropyLoss (or use NLLLoss on log_softmax outputs).",
)

SAMPLER_EPOCH_NOT_SET = FindingSpec(
    code="TOR005",
    slug="sampler-epoch-not-set",
    severity=Severity.WARNING,
    title="DistributedSampler.set_epoch never called",
    what="A DistributedSampler is used but set_epoch is never called: every epoch sees the same order.",
    why="Shuffling is silently off across epochs, which hurts convergence and generalisation.",
    example="for epoch in range(E): for batch in loader: ...  # no sampler.set_epoch(epoch)",
    fix="Call sampler.set_epoch(epoch) at the start of every epoch, before iterating the loader.",
)

SCHEDULER_BEFORE_OPTIMIZER = FindingSpec(
    code="TOR006",
    slug="scheduler-before-optimizer",
    severity=Severity.WARNING,
    title="lr_scheduler.step() before optimizer.step()",
    what="lr_scheduler.step() is called before optimizer.step().",
    why="The first value of the schedule is skipped: warm-up and decay are shifted by one step or epoch.",
    example="scheduler.step(); optimizer.step()",
    fix="Call optimizer.step() first, then scheduler.step().",
)

DECAY_ON_NORM_BIAS = FindingSpec(
    code="TOR007",
    slug="decay-on-norm-bias",
    severity=Severity.INFO,
    title="Weight decay on bias and normalisation parameters",
    what="Weight decay is applied to bias and normalisation parameters.",
    why="Decaying them regularises nothing useful and can cost accuracy, especially with AdamW.",
    example="AdamW(model.parameters(), weight_decay=0.05)",
    fix="Use trainmedic.train.param_groups(model, weight_decay) to exclude bias and norm parameters.",
)

UNSEEDED_RUN = FindingSpec(
    code="TOR008",
    slug="unseeded-run",
    severity=Severity.INFO,
    title="Run is not seeded",
    what="No seed was set for the run's random generators.",
    why="Results cannot be reproduced or compared across changes.",
    example="A script that never calls torch.manual_seed / random.seed / np.random.seed.",
    fix="Seed Python, NumPy and torch once at start (and the DataLoader generator).",
)

SPECS: tuple[FindingSpec, ...] = (
    FROZEN_PARAMETERS,
    EVAL_MODE_TRAINING,
    GRADS_NOT_ZEROED,
    SOFTMAX_INTO_CROSSENTROPY,
    SAMPLER_EPOCH_NOT_SET,
    SCHEDULER_BEFORE_OPTIMIZER,
    DECAY_ON_NORM_BIAS,
    UNSEEDED_RUN,
)

RULES: tuple[Rule, ...] = ()
