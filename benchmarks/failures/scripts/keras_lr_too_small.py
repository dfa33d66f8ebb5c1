"""Not learning in Keras: SGD at 1e-7 (a fine-tuning rate, and a typo away from 1e-3) from scratch.

The data is learnable (a linear rule) and the model is fine, but the epoch loss in
`history` stays at its initial level for 8 epochs. `--fixed` uses 0.05.
"""

import os
import sys

import numpy as np

if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
    import tf_keras as keras
else:
    import keras

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.normal(size=(512, 8)).astype("float32")
y = (x[:, 0] + x[:, 1] > 0).astype("float32")
layers = [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
model = keras.Sequential(layers)
lr = 0.05 if "--fixed" in sys.argv else 1e-7  # the bug: 1e-7
model.compile(keras.optimizers.SGD(learning_rate=lr), keras.losses.BinaryCrossentropy(from_logits=True))
history = model.fit(x, y, epochs=8, batch_size=32, verbose=0)
print("epoch losses:", " ".join(f"{v:.4f}" for v in history.history["loss"]))
