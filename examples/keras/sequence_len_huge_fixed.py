"""The fix of sequence_len_huge.py: the real length, looped by trainmedic.keras.LoopingSequence.

`LoopingSequence(seq, multiple=4)` is 4 x 8 = 32 batches long (the index list
Keras shuffles stays small), serves `seq[i % 8]`, and calls the wrapped
sequence's on_epoch_end once per pass over its 8 real batches.
"""

import os

import numpy as np

from trainmedic.keras import LoopingSequence

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
        self.passes = 0

    def __len__(self):
        return len(self.x) // self.batch_size  # the real number of batches

    def __getitem__(self, i):
        s = slice(i * self.batch_size, (i + 1) * self.batch_size)
        return self.x[s], self.y[s]

    def on_epoch_end(self):
        self.passes += 1


keras.utils.set_random_seed(0)
x = np.random.default_rng(0).normal(size=(256, 8)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
)
model.compile("adam", keras.losses.BinaryCrossentropy(from_logits=True))
batches = Batches(x, y, 32)
looping = LoopingSequence(batches, multiple=4)
history = model.fit(looping, steps_per_epoch=8, epochs=3, verbose=0)
epochs = len(history.history["loss"])
print(f"trained {epochs} epochs; {looping.served} batches served, {batches.passes} passes")
