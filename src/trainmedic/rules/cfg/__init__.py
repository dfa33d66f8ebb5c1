"""CFG: training configuration that cannot be right as written, one file a finding.

Collectors (`trainmedic check config`, and `trainmedic run` for the config files a
command names) turn each recognised file into a `TrainingConfig`
(`evidence/config_model.py`) and ship it as a
`GuardObservation(check="training_config")`; each finding's file reads only that plain
data, reproducing the arithmetic DeepSpeed and Hugging Face do at start-up so a wrong
config is caught before it queues for hours.
"""

from __future__ import annotations

from trainmedic.rules.cfg import cfg001_batch_size_mismatch as cfg001
from trainmedic.rules.cfg import cfg002_precision_conflict as cfg002
from trainmedic.rules.cfg import cfg003_lr_not_scaled as cfg003
from trainmedic.rules.cfg import cfg004_invalid_distributed_config as cfg004

#: The family table: one line a code, in catalogue order.
FAMILY = (cfg001, cfg002, cfg003, cfg004)
