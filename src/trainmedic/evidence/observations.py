"""Names of guard observations that a collector sends and the rules read, where the two share
nothing else. An observation whose data has a shape of its own keeps its name beside it
(`config_model.CONFIG_OBSERVATION`, `mllib`'s checks, `curves.HANDOVER_OBSERVATION`).
"""

from __future__ import annotations

#: What Keras' `fit` was given, observed before the adapter touches the data: the Keras
#: integration sends it (`trainmedic.keras`), KER001-KER003 read it (`rules/_helpers/keras.py`).
KERAS_INPUT = "keras_input"
#: The HF guard's copy of one training log of a TRL GRPO/RLOO trainer (`trainmedic.llm.rl`),
#: read by TRN015-TRN017 (`rules/_helpers/rl.py`).
RL_METRICS = "rl_metrics"
