"""Spark MLlib with an optimistic score: the evaluator scores the predictions for the very
DataFrame the Pipeline was fitted on, and nothing held out is ever scored. The number
printed measures memorisation. trainmedic reports TRN009.

    trainmedic run -- python examples/spark/mllib_evaluated_on_train.py
"""

from __future__ import annotations

from _data import loans, local_spark
from pyspark.ml import Pipeline
from pyspark.ml.classification import LogisticRegression
from pyspark.ml.evaluation import BinaryClassificationEvaluator
from pyspark.ml.feature import StandardScaler, VectorAssembler

if __name__ == "__main__":
    spark = local_spark("MLlibEvaluatedOnTrain")
    train, _unused_test = loans(spark).randomSplit([0.8, 0.2], seed=11)

    pipeline = Pipeline(
        stages=[
            VectorAssembler(inputCols=["income", "debt_ratio"], outputCol="raw_features"),
            StandardScaler(inputCol="raw_features", outputCol="features", withMean=True),
            LogisticRegression(maxIter=50, regParam=0.01),
        ]
    )
    model = pipeline.fit(train)

    auc = BinaryClassificationEvaluator(metricName="areaUnderROC").evaluate(model.transform(train))
    print(f"validation AUC: {auc:.3f}")  # scored on the training rows
    spark.stop()
