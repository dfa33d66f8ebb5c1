"""Spark MLlib with a leak: the StandardScaler learns its means and deviations from every row,
and only then does randomSplit set the test rows aside. The test AUC is scored on rows
whose statistics the features already carry. trainmedic reports DAT014.

    trainmedic run -- python examples/spark/mllib_scaler_before_split.py
"""

from __future__ import annotations

from _data import loans, local_spark
from pyspark.ml.classification import LogisticRegression
from pyspark.ml.evaluation import BinaryClassificationEvaluator
from pyspark.ml.feature import StandardScaler, VectorAssembler

if __name__ == "__main__":
    spark = local_spark("MLlibScalerBeforeSplit")
    data = loans(spark)

    assembled = VectorAssembler(inputCols=["income", "debt_ratio"], outputCol="raw_features").transform(data)
    scaler = StandardScaler(inputCol="raw_features", outputCol="features", withMean=True).fit(assembled)
    scaled = scaler.transform(assembled)

    train, test = scaled.randomSplit([0.8, 0.2], seed=11)  # too late: the scaler has seen the test rows
    model = LogisticRegression(maxIter=50, regParam=0.01).fit(train)

    auc = BinaryClassificationEvaluator(metricName="areaUnderROC").evaluate(model.transform(test))
    print(f"test AUC: {auc:.3f}")
    spark.stop()
