"""TRN: training dynamics, from the metrics trainmedic sees (any framework), one file a finding.

TRN001-TRN004 are pure, noise-robust rules over the loss curves of a `RunRecord`
(`evidence/curves.py` says which metric is "the loss"), shared by `trainmedic run`, the
in-process guards and `trainmedic diagnose`; TRN005-TRN008 and TRN010 read what the
PyTorch guard measures on sampled steps, TRN011 what it counts of a gradient scaler; TRN014
what TRL's DPOTrainer logs and builds; TRN015-TRN017 what TRL's RL trainers log; TRN009 the
eval sets of the boosters, the HF Trainer and Spark MLlib. Every threshold is a named constant beside its rule.
"""

from __future__ import annotations

from trainmedic.rules.trn import trn001_nonfinite_loss as trn001
from trainmedic.rules.trn import trn002_loss_divergence as trn002
from trainmedic.rules.trn import trn003_not_learning as trn003
from trainmedic.rules.trn import trn004_overfitting as trn004
from trainmedic.rules.trn import trn005_input_bound as trn005
from trainmedic.rules.trn import trn006_cannot_overfit_batch as trn006
from trainmedic.rules.trn import trn007_exploding_gradients as trn007
from trainmedic.rules.trn import trn008_vanishing_gradients as trn008
from trainmedic.rules.trn import trn009_eval_set_is_train as trn009
from trainmedic.rules.trn import trn010_clipping_saturated as trn010
from trainmedic.rules.trn import trn011_optimizer_steps_skipped as trn011
from trainmedic.rules.trn import trn012_zero_learning_rate as trn012
from trainmedic.rules.trn import trn013_updates_below_precision as trn013
from trainmedic.rules.trn import trn014_preference_at_chance as trn014
from trainmedic.rules.trn import trn015_reward_zero_variance as trn015
from trainmedic.rules.trn import trn016_kl_negative as trn016
from trainmedic.rules.trn import trn017_reward_hacking_length as trn017

#: The family table: one line a code, in catalogue order.
FAMILY = (
    trn001,
    trn002,
    trn003,
    trn004,
    trn005,
    trn006,
    trn007,
    trn008,
    trn009,
    trn010,
    trn011,
    trn012,
    trn013,
    trn014,
    trn015,
    trn016,
    trn017,
)
