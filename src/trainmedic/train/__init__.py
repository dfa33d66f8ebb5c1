"""Train correctly by construction: a readable PyTorch loop with full-state, bit-exact resume.

    from trainmedic.train import fit, param_groups, warmup_cosine
    fit(model, loader, optimizer=opt, loss_fn=F.cross_entropy, epochs=10,
        checkpoint_dir="ckpt", precision="bf16", grad_accum_steps=4)

See docs/train.md.
"""

from __future__ import annotations

from trainmedic.train.batch_size import BatchSizeResult, find_batch_size
from trainmedic.train.config import ConfigError, EarlyStopping, FitConfig
from trainmedic.train.loop import FitResult, fit, seed_everything
from trainmedic.train.optim import param_groups
from trainmedic.train.sampler import ResumableSampler
from trainmedic.train.schedules import (
    effective_batch_size,
    linear_scaled_lr,
    one_cycle,
    reduce_on_plateau,
    warmup_cosine,
    warmup_steps_for,
)

__all__ = [
    "BatchSizeResult",
    "ConfigError",
    "EarlyStopping",
    "FitConfig",
    "FitResult",
    "ResumableSampler",
    "effective_batch_size",
    "find_batch_size",
    "fit",
    "linear_scaled_lr",
    "one_cycle",
    "param_groups",
    "reduce_on_plateau",
    "seed_everything",
    "warmup_cosine",
    "warmup_steps_for",
]
