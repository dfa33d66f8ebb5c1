"""The fix of eval_memory_spike.py: a light val_loss each epoch, the heavy metric once, streamed.

- fit's validation_data keeps a cheap per-epoch validation loss;
- trainmedic.keras.Deferred runs the retrieval metric once, after the last epoch
  (`every=k` would run it every k epochs);
- the metric embeds the evaluation set in batches of 256 and keeps only what it
  needs, so even that one run stays near the training footprint.
"""

import argparse
import os

import numpy as np

from trainmedic.keras import Deferred

if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
    import tf_keras as keras
else:
    import keras

parser = argparse.ArgumentParser()
parser.add_argument("--eval-mb", type=int, default=250, help="size of the embeddings the metric would build")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--rows", type=int, default=8192, help="training rows (the last eighth validates)")
args = parser.parse_args()

EMBED = 2048
rng = np.random.default_rng(0)
x = rng.normal(size=(args.rows, 16)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
x_eval = rng.normal(size=(max(args.eval_mb * 2**20 // (4 * EMBED), 1), 16)).astype("float32")


class RetrievalMAP(keras.callbacks.Callback):
    """The same metric, streamed: 256 rows at a time, keeping one int per row."""

    def on_epoch_end(self, epoch, logs=None):
        embedder = keras.Sequential([keras.Input((16,)), keras.layers.Dense(EMBED)])
        top = [np.argmax(embedder(x_eval[i : i + 256]), axis=1) for i in range(0, len(x_eval), 256)]
        self.score = float(np.concatenate(top).mean() / EMBED)


keras.utils.set_random_seed(0)
model = keras.Sequential(
    [keras.Input((16,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(1)]
)
model.compile("adam", keras.losses.BinaryCrossentropy(from_logits=True))
metric = RetrievalMAP()
history = model.fit(
    x[: args.rows * 7 // 8],
    y[: args.rows * 7 // 8],
    validation_data=(x[args.rows * 7 // 8 :], y[args.rows * 7 // 8 :]),
    batch_size=32,
    epochs=args.epochs,
    verbose=0,
    callbacks=[Deferred(metric)],
)
print(f"trained {len(history.history['loss'])} epochs, val_map {metric.score:.3f} (once, after training)")
