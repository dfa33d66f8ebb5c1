"""Spark MLlib, done right: split first, tune and fit the whole Pipeline on the training part,
score the held-out part once.

    trainmedic run -- python examples/spark/mllib_healthy.py
    trainmedic run -- spark-submit examples/spark/mllib_healthy.py
"""

from __future__ import annotations

from _data import loans, local_spark
from pyspark.ml import Pipeline
from pyspark.ml.classification import LogisticRegression
from pyspark.ml.evaluation import BinaryClassificationEvaluator
from pyspark.ml.feature import StandardScaler, VectorAssembler
from pyspark.ml.tuning import CrossValidator, ParamGridBuilder

if __name__ == "__main__":
    spark = local_spark("MLlibHealthyPipeline")
    data = loans(spark)

    # Hold the test rows out before anything learns from the data.
    train, test = data.randomSplit([0.8, 0.2], seed=11)

    assembler = VectorAssembler(inputCols=["income", "debt_ratio"], outputCol="raw_features")
    scaler = StandardScaler(inputCol="raw_features", outputCol="features", withMean=True)
    classifier = LogisticRegression(maxIter=50, regParam=0.01)
    pipeline = Pipeline(stages=[assembler, scaler, classifier])

    # The scaler sits inside the Pipeline: each fold fits it on that fold's training rows.
    grid = ParamGridBuilder().addGrid(classifier.regParam, [0.01, 0.1]).build()
    auc = BinaryClassificationEvaluator(metricName="areaUnderROC")
    tuner = CrossValidator(estimator=pipeline, estimatorParamMaps=grid, evaluator=auc, numFolds=2, seed=5)
    model = tuner.fit(train)

    print(f"cross-validated AUC per regParam: {[round(m, 3) for m in model.avgMetrics]}")
    print(f"test AUC: {auc.evaluate(model.transform(test)):.3f}")
    spark.stop()
