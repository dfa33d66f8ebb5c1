"""KER001 sequence-too-short: __len__ counts 2 of the 20 batches the data makes.

Training "stalls": every epoch sees a tenth of the data. Under `trainmedic run`:
KER001 with len 2 vs 640 samples / 32. The fix is sequence_too_short_fixed.py.
"""

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
        return len(self.x) // self.batch_size // 10  # the bug: should be ceil(len(x) / batch_size)

    def __getitem__(self, i):
        s = slice(i * self.batch_size, (i + 1) * self.batch_size)
        return self.x[s], self.y[s]


keras.utils.set_random_seed(0)
x = np.random.default_rng(0).normal(size=(640, 8)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
)
model.compile("adam", keras.losses.BinaryCrossentropy(from_logits=True))
history = model.fit(Batches(x, y, 32), epochs=3, verbose=0)
print(f"trained {len(history.history['loss'])} epochs of {len(Batches(x, y, 32))} batches")
