"""The fix of input_exhausted.py: .repeat() the dataset, so 3 epochs x 10 steps really run."""

import os

import numpy as np
import tensorflow as tf

if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
    import tf_keras as keras
else:
    import keras

keras.utils.set_random_seed(0)
x = np.random.default_rng(0).normal(size=(64, 8)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
data = tf.data.Dataset.from_tensor_slices((x, y)).batch(16).repeat()
model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
)
model.compile("adam", keras.losses.BinaryCrossentropy(from_logits=True))
history = model.fit(data, epochs=3, steps_per_epoch=10, verbose=0)
print(f"trained {len(history.history['loss'])} of 3 epochs")
