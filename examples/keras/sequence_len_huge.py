"""KER002 sequence-len-huge: an 'infinite' Sequence (__len__ = sys.maxsize) with shuffle=True.

fit's adapter builds and shuffles list(range(len(seq))): with sys.maxsize it
fails at once (MemoryError / ResourceExhaustedError); with a large finite
length (`--length 1000000000`) memory grows until the OOM killer ends the
process, so run that one under `trainmedic run --memory-limit 2G`. Under
`trainmedic run` the fit is stopped before the adapter allocates, with the fix.
The fix is sequence_len_huge_fixed.py.
"""

import argparse
import os
import sys

import numpy as np

if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
    import tf_keras as keras

    Base = keras.utils.Sequence
else:
    import keras

    Base = keras.utils.PyDataset

parser = argparse.ArgumentParser()
parser.add_argument("--length", type=int, default=sys.maxsize, help="what __len__ claims")
args = parser.parse_args()


class Forever(Base):
    """Serves 8 real batches forever; steps_per_epoch decides how many an epoch takes."""

    def __init__(self, x, y, batch_size):
        super().__init__()
        self.x, self.y, self.batch_size = x, y, batch_size
        self.real_batches = len(x) // batch_size

    def __len__(self):
        return args.length  # the bug: an 'infinite' length

    def __getitem__(self, i):
        i %= self.real_batches
        s = slice(i * self.batch_size, (i + 1) * self.batch_size)
        return self.x[s], self.y[s]


keras.utils.set_random_seed(0)
x = np.random.default_rng(0).normal(size=(256, 8)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
)
model.compile("adam", keras.losses.BinaryCrossentropy(from_logits=True))
history = model.fit(Forever(x, y, 32), steps_per_epoch=8, epochs=3, verbose=0)
print(f"trained {len(history.history['loss'])} epochs")
