"""A healthy Keras run: a Sequence that covers its data, validation each epoch, exit 0.

Runs on every Keras line: Keras 3 (`KERAS_BACKEND=tensorflow|torch`) or legacy
tf-keras (`TF_USE_LEGACY_KERAS=1`). Under `trainmedic run` it produces no finding.
"""

import math
import os

import numpy as np

if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
    import tf_keras as keras

    Base = keras.utils.Sequence
else:
    import keras

    Base = keras.utils.PyDataset


class Batches(Base):
    def __init__(self, x, y, batch_size):
        super().__init__()
        self.x, self.y, self.batch_size = x, y, batch_size

    def __len__(self):
        return math.ceil(len(self.x) / self.batch_size)

    def __getitem__(self, i):
        s = slice(i * self.batch_size, (i + 1) * self.batch_size)
        return self.x[s], self.y[s]


keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.normal(size=(256, 8)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
)
model.compile("adam", keras.losses.BinaryCrossentropy(from_logits=True))
history = model.fit(Batches(x[:192], y[:192], 32), validation_data=(x[192:], y[192:]), epochs=3, verbose=0)
print(f"trained {len(history.history['loss'])} epochs, final loss {history.history['loss'][-1]:.4f}")
