"""A Keras model too large for the device: TensorFlow raises ResourceExhaustedError (OOM).

The usual cause is a Dense layer on a flattened feature map (or a batch) sized for
another machine. On a GPU this is "OOM when allocating tensor"; on CPU TensorFlow's
allocator refuses the same way once a single tensor is larger than memory. With oneDNN
(TensorFlow's default on x86) the refusal comes after 10 s: its allocator first waits for
memory to be returned, as a GPU's does; under TF_ENABLE_ONEDNN_OPTS=0 (as the failure
benchmark runs it) the plain CPU allocator refuses at once.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.normal(size=(64, 8)).astype("float32")
y = (x.sum(axis=1) > 0).astype("float32")

model = tf.keras.Sequential(
    [
        tf.keras.Input((8,)),
        tf.keras.layers.Dense(16, activation="relu"),
        # the bug: a "wide" layer sized as if the input were an un-pooled 4K feature map
        tf.keras.layers.Dense(1 << 22, activation="relu"),
        tf.keras.layers.Dense(1 << 14),
        tf.keras.layers.Dense(1),
    ]
)
model.compile("adam", "mse")
model.fit(x, y, epochs=2, batch_size=16, verbose=2)
