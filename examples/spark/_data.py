"""A small, made-up loan table shared by the MLlib examples (generated, nothing downloaded).

Two numeric features on very different scales and a label that depends on both, with noise:
a logistic regression reaches an AUC near 0.9 on held-out rows.
"""

from __future__ import annotations

import math
import random

from pyspark.sql import DataFrame, SparkSession


def local_spark(app_name: str) -> SparkSession:
    """A two-core local Spark, quiet and without its web UI (the examples run in seconds)."""
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def loans(spark: SparkSession, rows: int = 600, seed: int = 3) -> DataFrame:
    rng = random.Random(seed)
    records = []
    for _ in range(rows):
        income = rng.gauss(52_000, 15_000)
        debt_ratio = rng.uniform(0.0, 0.9)
        score = (income - 52_000) / 15_000 - 4.0 * (debt_ratio - 0.45) + rng.gauss(0, 0.8)
        records.append((income, debt_ratio, 1.0 if 1 / (1 + math.exp(-score)) > 0.5 else 0.0))
    return spark.createDataFrame(records, ["income", "debt_ratio", "label"])
