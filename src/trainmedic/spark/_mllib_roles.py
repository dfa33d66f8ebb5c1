"""What an MLlib estimator learns from the rows it is fitted on: its role for the guards.

See `trainmedic.evidence.mllib` for what each role means to DAT014 and TRN009. The role
comes from the class: `pyspark.ml.feature` estimators learn statistics unless they learn a
vocabulary (INDEXING) or nothing from the rows (random projections); a `Pipeline` is a
model when one of its stages is, else what its stages are; everything else fitted is a model.
"""

from __future__ import annotations

from typing import Any

from trainmedic.evidence.mllib import INDEXING, MODEL, STATISTICS, TUNING

# pyspark.ml.feature estimators that learn categories, not numbers, from the rows.
INDEXING_ESTIMATORS = frozenset(
    {"StringIndexer", "VectorIndexer", "OneHotEncoder", "CountVectorizer", "RFormula", "Word2Vec"}
)
# pyspark.ml.feature estimators whose fit draws random projections and reads no statistic.
ROW_FREE_ESTIMATORS = frozenset({"MinHashLSH", "BucketedRandomProjectionLSH"})
TUNERS = frozenset({"CrossValidator", "TrainValidationSplit"})
NO_ROLE = "none"


def role_of(estimator: Any) -> str:
    name = type(estimator).__name__
    if name in TUNERS:
        return TUNING
    if name == "Pipeline":
        return _pipeline_role(estimator)
    if type(estimator).__module__.startswith("pyspark.ml.feature"):
        if name in ROW_FREE_ESTIMATORS:
            return NO_ROLE
        return INDEXING if name in INDEXING_ESTIMATORS else STATISTICS
    return MODEL


def _pipeline_role(pipeline: Any) -> str:
    from pyspark.ml.base import Estimator

    stages = pipeline.getStages() if hasattr(pipeline, "getStages") else []
    roles = {role_of(stage) for stage in stages if isinstance(stage, Estimator)}
    for role in (MODEL, TUNING, STATISTICS, INDEXING):
        if role in roles:
            return MODEL if role == TUNING else role
    return NO_ROLE
