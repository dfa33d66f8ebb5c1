"""TOR: the classic PyTorch loop bugs, one file a finding.

The in-process guard (`trainmedic.torch`, auto-installed under `run`) measures and
sends observations; each finding's file decides and words its own.
"""

from __future__ import annotations

from trainmedic.rules.tor import tor001_frozen_parameters as tor001
from trainmedic.rules.tor import tor002_eval_mode_training as tor002
from trainmedic.rules.tor import tor003_grads_not_zeroed as tor003
from trainmedic.rules.tor import tor004_softmax_into_crossentropy as tor004
from trainmedic.rules.tor import tor005_sampler_epoch_not_set as tor005
from trainmedic.rules.tor import tor006_scheduler_before_optimizer as tor006
from trainmedic.rules.tor import tor007_decay_on_norm_bias as tor007
from trainmedic.rules.tor import tor008_unseeded_run as tor008
from trainmedic.rules.tor import tor009_single_class_cross_entropy as tor009
from trainmedic.rules.tor import tor010_no_supervised_tokens as tor010
from trainmedic.rules.tor import tor011_eos_never_supervised as tor011
from trainmedic.rules.tor import tor012_adapters_not_learning as tor012
from trainmedic.rules.tor import tor013_labels_double_shifted as tor013
from trainmedic.rules.tor import tor014_new_tokens_untrained as tor014
from trainmedic.rules.tor import tor015_saved_model_differs as tor015
from trainmedic.rules.tor import tor016_adapter_saved_empty as tor016
from trainmedic.rules.tor import tor017_resume_state_lost as tor017

#: The family table: one line a code, in catalogue order.
FAMILY = (
    tor001,
    tor002,
    tor003,
    tor004,
    tor005,
    tor006,
    tor007,
    tor008,
    tor009,
    tor010,
    tor011,
    tor012,
    tor013,
    tor014,
    tor015,
    tor016,
    tor017,
)
