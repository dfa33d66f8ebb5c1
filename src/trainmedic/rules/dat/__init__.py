"""DAT: data readiness before training (`trainmedic check data`), one file a finding.

The data checks (`trainmedic.data`: pandas, DuckDB or Spark; images; the input contract) and
the scikit-learn audit measure and send typed evidence; each finding's file decides and
words its own (`judge`, `message`, `fix`).
"""

from __future__ import annotations

from trainmedic.rules.dat import dat001_split_overlap as dat001
from trainmedic.rules.dat import dat002_near_duplicate_overlap as dat002
from trainmedic.rules.dat import dat003_group_overlap as dat003
from trainmedic.rules.dat import dat004_temporal_overlap as dat004
from trainmedic.rules.dat import dat005_target_leakage as dat005
from trainmedic.rules.dat import dat006_conflicting_labels as dat006
from trainmedic.rules.dat import dat007_duplicate_rows as dat007
from trainmedic.rules.dat import dat008_missing_values as dat008
from trainmedic.rules.dat import dat009_class_imbalance as dat009
from trainmedic.rules.dat import dat010_schema_mismatch as dat010
from trainmedic.rules.dat import dat011_feature_drift as dat011
from trainmedic.rules.dat import dat012_label_noise as dat012
from trainmedic.rules.dat import dat013_preprocessing_mismatch as dat013
from trainmedic.rules.dat import dat014_preprocessing_before_split as dat014
from trainmedic.rules.dat import dat015_identifier_column as dat015
from trainmedic.rules.dat import dat016_chat_template_mismatch as dat016
from trainmedic.rules.dat import dat017_completion_truncated as dat017
from trainmedic.rules.dat import dat018_identical_preference_pairs as dat018
from trainmedic.rules.dat import dat019_preference_length_bias as dat019
from trainmedic.rules.dat import dat020_double_bos as dat020

#: The family table: one line a code, in catalogue order.
FAMILY = (
    dat001,
    dat002,
    dat003,
    dat004,
    dat005,
    dat006,
    dat007,
    dat008,
    dat009,
    dat010,
    dat011,
    dat012,
    dat013,
    dat014,
    dat015,
    dat016,
    dat017,
    dat018,
    dat019,
    dat020,
)
