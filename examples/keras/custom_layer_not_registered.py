"""A custom layer not registered as serializable: the `.keras` file the run saves does not reload.

Keras 3 writes a custom class into the file's config by its class name only; without
`@keras.saving.register_keras_serializable()` (or `custom_objects=`), `keras.models.load_model`
cannot locate it, not even in the process that saved it (Keras 3.15.1: "TypeError: Could not
locate class 'Gate'"). Training goes well, `ModelCheckpoint` writes `model.keras` each epoch,
and the model is lost at the first attempt to serve it.

Under `trainmedic run`: TOR015 `saved-model-differs` (reload-failed) with the class and the fix.
Fixed in `custom_layer_not_registered_fixed.py`. Keras 3 only (`--out DIR`: where the model
goes, a temp folder by default).
"""

import argparse
import tempfile
from pathlib import Path

import numpy as np

import keras

parser = argparse.ArgumentParser()
parser.add_argument("--out", default=None)
out = Path(parser.parse_args().out or tempfile.mkdtemp(prefix="keras-example-"))
out.mkdir(parents=True, exist_ok=True)


class Gate(keras.layers.Layer):
    """x * sigmoid(w): a learned gate per feature."""

    def build(self, shape):
        self.w = self.add_weight(shape=(shape[-1],), initializer="zeros")

    def call(self, x):
        return x * keras.ops.sigmoid(self.w)


keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.normal(size=(256, 8)).astype("float32")
y = (x[:, :2].sum(axis=1, keepdims=True) > 0).astype("float32")
model = keras.Sequential(
    [
        keras.Input((8,)),
        Gate(),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(1, activation="sigmoid"),
    ]
)
model.compile(keras.optimizers.Adam(0.02), "binary_crossentropy", metrics=["accuracy"])
history = model.fit(
    x,
    y,
    batch_size=32,
    epochs=3,
    verbose=0,
    callbacks=[keras.callbacks.ModelCheckpoint(str(out / "model.keras"))],
)
print(f"accuracy {history.history['accuracy'][-1]:.2f}; saved {out / 'model.keras'}")
