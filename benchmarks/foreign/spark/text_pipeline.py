"""Spark MLlib text classification: Tokenizer, HashingTF, IDF and LogisticRegression in a Pipeline.

In the style of the Spark ML pipeline and TF-IDF examples: a DataFrame of (id, text, label),
a Pipeline of feature transformers and estimators, randomSplit for a test set, a
MulticlassClassificationEvaluator on the test predictions. The documents are generated:
words of a "billing" or a "shipping" vocabulary mixed with common words.

Healthy as written. `--bug idf-before-split` fits the IDF on every document, transforms them
all, and only then calls randomSplit: the document frequencies include the test documents
(DAT014). `--bug score-training` scores the predictions for the training documents and
prints them as the model's accuracy (TRN009).
"""

import argparse
import random

from pyspark.ml import Pipeline
from pyspark.ml.classification import LogisticRegression
from pyspark.ml.evaluation import MulticlassClassificationEvaluator
from pyspark.ml.feature import IDF, HashingTF, Tokenizer
from pyspark.sql import SparkSession

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["idf-before-split", "score-training"], default=None)
args = parser.parse_args()

spark = (
    SparkSession.builder.master("local[2]")
    .appName("TextPipeline")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")

rng = random.Random(7)
topics = {
    0.0: ["invoice", "refund", "charge", "payment", "card", "billing", "receipt", "balance"],
    1.0: ["parcel", "courier", "delivery", "tracking", "address", "shipment", "package", "carrier"],
}
common = ["the", "a", "my", "please", "thanks", "help", "order", "today", "still", "again"]
documents = []
for doc_id in range(400):
    label = float(doc_id % 2)
    words = rng.choices(topics[label], k=4) + rng.choices(topics[1.0 - label], k=1) + rng.choices(common, k=6)
    rng.shuffle(words)
    documents.append((doc_id, " ".join(words), label))
data = spark.createDataFrame(documents, ["id", "text", "label"])

tokenizer = Tokenizer(inputCol="text", outputCol="words")
hashing = HashingTF(inputCol="words", outputCol="tf", numFeatures=256)
idf = IDF(inputCol="tf", outputCol="features")
classifier = LogisticRegression(maxIter=30, regParam=0.02)

if args.bug == "idf-before-split":
    term_frequencies = hashing.transform(tokenizer.transform(data))
    weighted = idf.fit(term_frequencies).transform(term_frequencies)
    training, test = weighted.randomSplit([0.75, 0.25], seed=3)
    model = classifier.fit(training)
else:
    training, test = data.randomSplit([0.75, 0.25], seed=3)
    model = Pipeline(stages=[tokenizer, hashing, idf, classifier]).fit(training)

scored = training if args.bug == "score-training" else test
accuracy = MulticlassClassificationEvaluator(metricName="accuracy").evaluate(model.transform(scored))
print(f"accuracy = {accuracy:.3f}")
spark.stop()
