"""Overhead of the Spark MLlib guards of `trainmedic run`: the healthy example's work (randomSplit,
Pipeline fit, evaluate), bare and with the guards' wrappers, alternating, in one local Spark.

    python benchmarks/mllib_overhead.py

The wrappers walk a DataFrame's logical plan (py4j calls, no Spark job) at each fit, split and
evaluate; the events go nowhere outside `trainmedic run`, so what is timed is that walk. Prints
the median of each and their ratio, and the median time of one plan walk.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "spark"))

from _data import loans, local_spark
from pyspark.ml import Pipeline
from pyspark.ml.base import Estimator
from pyspark.ml.classification import LogisticRegression
from pyspark.ml.evaluation import BinaryClassificationEvaluator, Evaluator
from pyspark.ml.feature import StandardScaler, VectorAssembler
from pyspark.sql.classic.dataframe import DataFrame

from trainmedic.spark import _mllib
from trainmedic.spark._mllib_plans import plan_of

REPEATS = 5
PATCHED = ((Estimator, "fit"), (Evaluator, "evaluate"), (DataFrame, "randomSplit"))


def work(data: DataFrame) -> None:
    train, test = data.randomSplit([0.8, 0.2], seed=11)
    pipeline = Pipeline(
        stages=[
            VectorAssembler(inputCols=["income", "debt_ratio"], outputCol="raw_features"),
            StandardScaler(inputCol="raw_features", outputCol="features", withMean=True),
            LogisticRegression(maxIter=50, regParam=0.01),
        ]
    )
    model = pipeline.fit(train)
    BinaryClassificationEvaluator().evaluate(model.transform(test))


def timed(data: DataFrame) -> float:
    start = time.perf_counter()
    work(data)
    return time.perf_counter() - start


def main() -> None:
    spark = local_spark("MLlibGuardOverhead")
    data = loans(spark).cache()
    data.count()
    bare_methods = {(owner, name): getattr(owner, name) for owner, name in PATCHED}
    _mllib.install(sys.modules["pyspark.ml"])
    guarded_methods = {(owner, name): getattr(owner, name) for owner, name in PATCHED}
    work(data)  # warm-up: the JVM compiles the code paths once
    bare, guarded = [], []
    for _ in range(REPEATS):
        for methods, times in ((bare_methods, bare), (guarded_methods, guarded)):
            for (owner, name), method in methods.items():
                setattr(owner, name, method)
            times.append(timed(data))
    walks = []
    for _ in range(20):
        start = time.perf_counter()
        plan_of(data.randomSplit([0.8, 0.2], seed=1)[0])
        walks.append(time.perf_counter() - start)
    b, g = statistics.median(bare), statistics.median(guarded)
    print(f"bare {b:.3f}s  guarded {g:.3f}s  guarded/bare = {g / b:.3f}  (median of {REPEATS})")
    print(f"one plan walk: {statistics.median(walks) * 1000:.1f} ms (median of {len(walks)})")
    spark.stop()


if __name__ == "__main__":
    main()
