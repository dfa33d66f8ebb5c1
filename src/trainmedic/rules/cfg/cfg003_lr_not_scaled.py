"""CFG003 `lr-not-scaled`: a learning rate not scaled with the batch.

Collector: `trainmedic.configcheck` (`trainmedic check config FILE --reference OLD`, and
`trainmedic run` for the config files a command names) reads each config into a
`TrainingConfig` (`evidence/config_model.py`: the batch values, lr, warmup_steps)
and sends it as a `training_config` observation, the reference with role "reference".
Without a reference, a large batch with warm-up written as 0 is still flagged.
"""

from __future__ import annotations

import math

from trainmedic.events import Event
from trainmedic.evidence.config_model import TrainingConfig
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.configs import configs, observed

# A batch change below this factor is noise, not a new regime (CFG003).
_BATCH_CHANGE = 2.0
_LR_SAME = 0.05  # relative difference under which two learning rates are "the same"
# Samples per optimizer step from which a run without warm-up is flagged (Goyal et al. 2017 needed
# warm-up from 8k on ImageNet; large-batch LLM recipes always warm up).
LARGE_BATCH = 4096


def _example() -> list[Event]:
    """Reference: 256 samples per step at lr 0.1. New: 2048 (8 GPUs), lr still 0.1, no warm-up."""
    reference = TrainingConfig(source="loop", file="old.json", role="reference", global_batch=256, lr=0.1)
    new = TrainingConfig(source="loop", file="new.json", global_batch=2048, lr=0.1, warmup_steps=0)
    return observed(reference, new)


SPEC = FindingSpec(
    code="CFG003",
    slug="lr-not-scaled",
    severity=Severity.WARNING,
    title="Learning rate not scaled with the batch",
    what=(
        "The effective batch size changed relative to a reference run or config but the "
        "learning rate / warm-up did not, or warm-up is missing at a large batch."
    ),
    why=(
        "With SGD the update per sample shrinks as the batch grows (linear-scaling rule, Goyal "
        "et al. 2017): the same LR at 8x the batch under-trains in the same number of epochs; at "
        "a much smaller batch it can diverge. Large batches need warm-up for the first steps."
    ),
    example=(
        "Reference: 256 samples per step, lr 0.1. New: 2048 (8 GPUs), lr still 0.1, no warm-up.\n"
        "trainmedic check config new.json --reference old.json"
    ),
    fix=(
        "Scale the LR with the effective batch: linearly for SGD, by the square root for Adam-type "
        "optimizers; add a linear warm-up of a few hundred steps at large batches."
    ),
    decided_in=("run events", "config check"),
    example_input=_example,
)


def lr_not_scaled(record: RunRecord) -> list[Finding]:
    references = configs(record, role="reference")
    found: list[Finding] = []
    for cfg in configs(record):
        finding = _lr_finding(cfg, references[-1]) if references else None
        if finding is None:
            finding = _large_batch_without_warmup(cfg)
        if finding is not None:
            found.append(finding)
    return found


def _large_batch_without_warmup(cfg: TrainingConfig) -> Finding | None:
    """Warm-up written as 0 (not merely absent) at an effective batch of LARGE_BATCH or more."""
    batch = cfg.effective_batch()
    if batch is None or batch < LARGE_BATCH or cfg.warmup_steps is None or cfg.warmup_steps > 0:
        return None
    return SPEC.finding(
        f"The effective batch is {batch:,} samples per step and {cfg.name('warmup_steps')} is 0: "
        "large batches need a warm-up of the learning rate",
        evidence={"batch": batch, "warmup_steps": cfg.warmup_steps, "lr": cfg.lr, "threshold": LARGE_BATCH},
        fix="Add a linear warm-up (a few hundred to a few thousand steps, or ~5% of training).",
        file=cfg.file or None,
    )


def _lr_finding(cfg: TrainingConfig, ref: TrainingConfig) -> Finding | None:
    new_batch, old_batch = cfg.effective_batch(), ref.effective_batch()
    if not new_batch or not old_batch or cfg.lr is None or ref.lr is None or ref.lr <= 0:
        return None
    ratio = new_batch / old_batch
    if 1 / _BATCH_CHANGE < ratio < _BATCH_CHANGE:
        return None
    lr_ratio = cfg.lr / ref.lr
    lr_same = abs(lr_ratio - 1) <= _LR_SAME
    no_warmup = ratio > 1 and not cfg.warmup_steps and (ref.warmup_steps or 0) <= (cfg.warmup_steps or 0)
    if not lr_same and not (no_warmup and ratio >= 4):
        return None
    evidence = {
        "reference_file": ref.file,
        "reference_batch": old_batch,
        "batch": new_batch,
        "batch_ratio": round(ratio, 3),
        "reference_lr": ref.lr,
        "lr": cfg.lr,
        "lr_ratio": round(lr_ratio, 3),
        "warmup_steps": cfg.warmup_steps,
        "linear_scaled_lr": ref.lr * ratio,
        "sqrt_scaled_lr": ref.lr * math.sqrt(ratio),
    }
    if lr_same:
        message = (
            f"The effective batch went from {old_batch} to {new_batch} ({ratio:.3g}x) but "
            f"{cfg.name('lr')} stayed at {cfg.lr:g}"
        )
    else:
        message = f"The effective batch grew {ratio:.3g}x ({old_batch} -> {new_batch}) with no warm-up"
    return SPEC.finding(
        message,
        evidence=evidence,
        fix=(
            f"Set {cfg.name('lr')} to ~{ref.lr * ratio:.3g} (linear, SGD) or ~{ref.lr * math.sqrt(ratio):.3g} "
            "(square root, Adam)" + ("; add a linear warm-up of a few hundred steps" if ratio > 1 else "")
        ),
        file=cfg.file or None,
    )


RULES: tuple[Rule, ...] = (lr_not_scaled,)
