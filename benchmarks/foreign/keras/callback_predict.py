"""Keras functional classifier whose epoch-end callback scores a held-out set with predict().

Healthy as written: the callback predicts in batches of 256 and keeps only the class
indices. `--bug whole-set` predicts the whole (tiled) set in one batch and keeps every
hidden activation, as a "quick" feature-dump callback does: memory spikes at each epoch
end, and under `trainmedic run --memory-limit 900M` the kernel kills the trainer there
(RUN001 oom-killed with RUN003 eval-memory-spike).

Synthetic data: 16 features, 4 classes that depend on the features (learnable).
"""

import argparse

import numpy as np

import keras

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["whole-set"], default=None)
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()

rng = np.random.default_rng(0)
centers = rng.normal(size=(4, 16)).astype("float32")
y_train = rng.integers(0, 4, size=32768)
x_train = (centers[y_train] + 0.8 * rng.normal(size=(32768, 16))).astype("float32")
y_val = rng.integers(0, 4, size=2048)
x_val = (centers[y_val] + 0.8 * rng.normal(size=(2048, 16))).astype("float32")


class HeldOutAccuracy(keras.callbacks.Callback):
    """Accuracy on the held-out set, printed at every epoch end."""

    def __init__(self, x, y, whole_set):
        super().__init__()
        self.x, self.y, self.whole_set = x, y, whole_set

    def on_epoch_end(self, epoch, logs=None):
        if self.whole_set:
            # Tiled 64x to "stress-test", in one batch, with the hidden features kept as well.
            x = np.tile(self.x, (64, 1))
            features = keras.Model(self.model.inputs, self.model.layers[-2].output)
            hidden = features.predict(x, batch_size=len(x), verbose=0)
            probs = self.model.predict(x, batch_size=len(x), verbose=0)
            pred = probs.argmax(axis=1)[: len(self.y)]
            print(f"epoch {epoch + 1}: hidden {hidden.shape}")
        else:
            pred = self.model.predict(self.x, batch_size=256, verbose=0).argmax(axis=1)
        print(f"epoch {epoch + 1}: held-out accuracy {(pred == self.y).mean():.3f}")


inputs = keras.Input(shape=(16,))
h = keras.layers.Dense(64, activation="relu")(inputs)
h = keras.layers.Dense(512, activation="relu")(h)
outputs = keras.layers.Dense(4, activation="softmax")(h)
model = keras.Model(inputs, outputs)
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(
    x_train,
    y_train,
    batch_size=32,
    epochs=args.epochs,
    verbose=2,
    callbacks=[HeldOutAccuracy(x_val, y_val, args.bug == "whole-set")],
)
