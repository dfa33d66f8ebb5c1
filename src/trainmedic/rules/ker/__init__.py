"""KER: Keras / TensorFlow input pipeline and fit bookkeeping, one file a finding.

The Keras integration (auto-instrumentation under `trainmedic run`, or
`trainmedic.keras.Guard`) describes every `fit` call with observations (see
`rules/_helpers/keras.py`); each finding's file decides and words its own. The
in-process guard calls KER002's `judge` to stop a run before an OOM.
"""

from __future__ import annotations

from trainmedic.rules.ker import ker001_sequence_too_short as ker001
from trainmedic.rules.ker import ker002_sequence_len_huge as ker002
from trainmedic.rules.ker import ker003_history_epochs_mismatch as ker003
from trainmedic.rules.ker import ker004_single_unit_softmax as ker004

#: The family table: one line a code, in catalogue order.
FAMILY = (ker001, ker002, ker003, ker004)
