"""RUN005 input-exhausted (and, on legacy tf.keras, KER003 + RUN004): no .repeat().

The dataset has 4 batches; fit asks for 3 epochs of 10 steps. Keras prints
"Your input ran out of data; interrupting training" and exits 0, but:
- legacy tf.keras (TF_USE_LEGACY_KERAS=1) returns after 1 epoch (history holds 1);
- Keras 3 runs all 3 epochs with 4 steps each instead of 10.
`--generator` feeds a one-pass Python generator instead (Keras 3: ragged epochs).
The fix is input_exhausted_fixed.py.
"""

import argparse
import os

import numpy as np
import tensorflow as tf

if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
    import tf_keras as keras
else:
    import keras

parser = argparse.ArgumentParser()
parser.add_argument("--generator", action="store_true", help="a one-pass Python generator")
args = parser.parse_args()

keras.utils.set_random_seed(0)
x = np.random.default_rng(0).normal(size=(64, 8)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")


def one_pass():
    for i in range(4):
        yield x[i * 16 : (i + 1) * 16], y[i * 16 : (i + 1) * 16]


data = one_pass() if args.generator else tf.data.Dataset.from_tensor_slices((x, y)).batch(16)  # no .repeat()
model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
)
model.compile("adam", keras.losses.BinaryCrossentropy(from_logits=True))
history = model.fit(data, epochs=3, steps_per_epoch=10, verbose=0)
print(f"trained {len(history.history['loss'])} of 3 epochs")
