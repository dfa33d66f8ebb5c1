"""CFG: training configuration that cannot be right as written.

Collectors (`trainmedic check config`, and instrumentation that sees the config a
run loads) turn each recognised file into a `TrainingConfig` and ship it as a
`GuardObservation(check="training_config")`. The rules read only that plain data:
the arithmetic DeepSpeed and Hugging Face do at start-up is reproduced so a wrong
config is caught before it queues for hours. `batch` holds CFG001 and CFG004,
`precision` CFG002, `lr` CFG003; `_model` the data they share.
"""

from __future__ import annotations

from trainmedic.findings import FindingSpec
from trainmedic.record import Rule
from trainmedic.rules.config._model import CONFIG_CHECK, HARDWARE_PRECISIONS, TrainingConfig, configs
from trainmedic.rules.config.batch import (
    BATCH_SIZE_MISMATCH,
    INVALID_DISTRIBUTED_CONFIG,
    batch_size_mismatch,
    invalid_distributed_config,
)
from trainmedic.rules.config.lr import LARGE_BATCH, LR_NOT_SCALED, lr_not_scaled
from trainmedic.rules.config.precision import PRECISION_CONFLICT, precision_conflict

__all__ = [
    "BATCH_SIZE_MISMATCH",
    "CONFIG_CHECK",
    "HARDWARE_PRECISIONS",
    "INVALID_DISTRIBUTED_CONFIG",
    "LARGE_BATCH",
    "LR_NOT_SCALED",
    "PRECISION_CONFLICT",
    "RULES",
    "SPECS",
    "TrainingConfig",
    "batch_size_mismatch",
    "configs",
    "invalid_distributed_config",
    "lr_not_scaled",
    "precision_conflict",
]

SPECS: tuple[FindingSpec, ...] = (
    BATCH_SIZE_MISMATCH,
    PRECISION_CONFLICT,
    LR_NOT_SCALED,
    INVALID_DISTRIBUTED_CONFIG,
)

RULES: tuple[Rule, ...] = (
    batch_size_mismatch,
    precision_conflict,
    lr_not_scaled,
    invalid_distributed_config,
)
