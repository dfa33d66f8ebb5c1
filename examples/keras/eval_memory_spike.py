"""RUN003 eval-memory-spike / RUN001 oom-killed: a heavy metric at every epoch end.

The callback builds a second model and embeds the whole evaluation set in one
batch at each epoch end (the shape of the per-epoch mAP callbacks of detection
code): memory jumps by about 4 x --eval-mb at every epoch boundary. Under
`trainmedic run` the spike is reported against the training steady state; under
`trainmedic run --memory-limit 1G` it is an OOM kill at the end of the first epoch
(verified on Keras 3: the trainer's RSS is about 0.8 GB in training, TensorFlow's
libraries included, and 1.8 GB at each epoch end; the fixed version stays near 0.8 GB).
Training has 1,024 steps per epoch (about a second here) so that, as in real runs, the
training phase spans several of the supervisor's 0.5 s memory samples and gives a steady
state (--rows).
The fix is eval_memory_spike_fixed.py.
"""

import argparse
import os

import numpy as np

if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
    import tf_keras as keras
else:
    import keras

parser = argparse.ArgumentParser()
parser.add_argument("--eval-mb", type=int, default=250, help="size of the embeddings the metric builds")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--rows", type=int, default=32768, help="training rows (1,024 steps of 32 per epoch)")
args = parser.parse_args()

EMBED = 2048
rng = np.random.default_rng(0)
x = rng.normal(size=(args.rows, 16)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
x_eval = rng.normal(size=(max(args.eval_mb * 2**20 // (4 * EMBED), 1), 16)).astype("float32")


class RetrievalMAP(keras.callbacks.Callback):
    """Scores retrieval with a second model over the whole evaluation set, every epoch."""

    def on_epoch_end(self, epoch, logs=None):
        embedder = keras.Sequential([keras.Input((16,)), keras.layers.Dense(EMBED)])
        embeddings = embedder.predict(x_eval, batch_size=len(x_eval), verbose=0)  # all at once
        ranks = np.argsort(-embeddings, axis=1)  # int64: twice the embeddings again
        if logs is not None:
            logs["val_map"] = float(ranks[:, 0].mean() / EMBED)


keras.utils.set_random_seed(0)
model = keras.Sequential(
    [keras.Input((16,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(1)]
)
model.compile("adam", keras.losses.BinaryCrossentropy(from_logits=True))
history = model.fit(x, y, batch_size=32, epochs=args.epochs, verbose=0, callbacks=[RetrievalMAP()])
print(f"trained {len(history.history['loss'])} epochs, val_map {history.history['val_map'][-1]:.3f}")
