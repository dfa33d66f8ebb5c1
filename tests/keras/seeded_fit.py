"""A seeded fit that draws on every random source Keras uses; prints a digest of what it made.

Shuffled arrays with validation_split (TF/Keras RNG), a shuffled PyDataset
(Python's `random`), dropout, evaluate and predict. The last line prints the
next draws of Python's and NumPy's global generators: an instrumentation that
consumed a random number would change them.
"""

import hashlib
import os
import random

import numpy as np

if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
    import tf_keras as keras

    Base = keras.utils.Sequence
else:
    import keras

    Base = keras.utils.PyDataset


class Batches(Base):
    def __init__(self, x, y):
        super().__init__()
        self.x, self.y = x, y

    def __len__(self):
        return len(self.x) // 16

    def __getitem__(self, i):
        return self.x[i * 16 : (i + 1) * 16], self.y[i * 16 : (i + 1) * 16]


keras.utils.set_random_seed(7)
x = np.random.normal(size=(96, 6)).astype("float32")
y = (x[:, :1] > 0).astype("float32")
model = keras.Sequential(
    [
        keras.Input((6,)),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dropout(0.3),
        keras.layers.Dense(1),
    ]
)
model.compile("adam", keras.losses.BinaryCrossentropy(from_logits=True))
first = model.fit(x, y, batch_size=16, epochs=2, validation_split=0.25, verbose=0)
second = model.fit(Batches(x, y), epochs=2, verbose=0)
loss = model.evaluate(x, y, verbose=0)
predictions = model.predict(x[:8], verbose=0)
digest = hashlib.sha256(b"".join(np.asarray(w).tobytes() for w in model.get_weights())).hexdigest()
print("weights", digest)
print("history", first.history, second.history)
print("evaluate", repr(loss), "predict", predictions.ravel().tolist())
print("next draws", random.random(), np.random.random())
