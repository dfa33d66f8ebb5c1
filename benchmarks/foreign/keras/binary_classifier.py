"""Keras binary classifier on scikit-learn's bundled breast-cancer table.

In the style of the Keras structured-data and imbalanced-classification examples: a
`Normalization` layer adapted to the training features, a small MLP with dropout, one
output unit with a sigmoid and `binary_crossentropy`, Adam, a validation set.

Healthy as written. `--bug softmax-unit` writes the output layer as
`Dense(1, activation="softmax")` (the multi-class habit kept for a binary head): softmax over
one unit is 1.0 for every input, so the model predicts class 1 everywhere, its loss stays
where it started and no gradient reaches the weights (KER004 single-unit-softmax).
"""

import argparse

from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

import keras

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["softmax-unit"], default=None)
parser.add_argument("--epochs", type=int, default=6)
args = parser.parse_args()

x, y = load_breast_cancer(return_X_y=True)
x_train, x_val, y_train, y_val = train_test_split(
    x.astype("float32"), y.astype("float32"), test_size=0.2, random_state=0, stratify=y
)

keras.utils.set_random_seed(0)
normalizer = keras.layers.Normalization()
normalizer.adapt(x_train)
model = keras.Sequential(
    [
        keras.Input(shape=(x.shape[1],)),
        normalizer,
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(1, activation="softmax" if args.bug == "softmax-unit" else "sigmoid"),
    ]
)
model.compile(
    optimizer=keras.optimizers.Adam(1e-3),
    loss="binary_crossentropy",
    metrics=[keras.metrics.BinaryAccuracy(name="accuracy"), keras.metrics.AUC(name="auc")],
)
history = model.fit(
    x_train, y_train, batch_size=32, epochs=args.epochs, validation_data=(x_val, y_val), verbose=2
)
print(f"val accuracy {history.history['val_accuracy'][-1]:.3f}")
