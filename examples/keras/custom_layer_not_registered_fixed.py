"""The fix of `custom_layer_not_registered.py`: the custom layer registered as serializable.

`@keras.saving.register_keras_serializable()` records the class under a registered name in the
`.keras` file, and `keras.models.load_model` finds it wherever the module that defines it is
imported. The script reloads its own checkpoint at the end and compares the outputs.

Under `trainmedic run`: no finding (the class lives in this script, which no other process can
import, so the check's worker reads the file back without reloading it; the script's own
reload shows it works). Keras 3 only (`--out DIR`: where the model goes, a temp folder by default).
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


@keras.saving.register_keras_serializable(package="example")
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
reloaded = keras.models.load_model(out / "model.keras")
difference = float(np.abs(reloaded.predict(x[:8], verbose=0) - model.predict(x[:8], verbose=0)).max())
print(f"accuracy {history.history['accuracy'][-1]:.2f}; reloaded, outputs differ by {difference:.1e}")
