"""Guard, LoopingSequence and Deferred in a plain interpreter (no supervisor); prints JSON facts.

Run with the environment of one Keras line; the test asserts on the JSON.
"""

import io
import json
import os
import sys

import numpy as np

from trainmedic.keras import Deferred, Guard, LoopingSequence, SequenceLenHugeError

LEGACY = os.environ.get("TF_USE_LEGACY_KERAS") == "1"
if LEGACY:
    import tf_keras as keras

    Base = keras.utils.Sequence
else:
    import keras

    Base = keras.utils.PyDataset

rng = np.random.default_rng(0)
X = rng.normal(size=(128, 4)).astype("float32")
Y = (X.sum(axis=1, keepdims=True) > 0).astype("float32")


class Batches(Base):
    def __init__(self, n_batches, length=None, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y, self.batch_size = X[: n_batches * 16], Y[: n_batches * 16], 16
        self.n_batches, self.length, self.ends = n_batches, length, 0

    def __len__(self):
        return self.length if self.length is not None else self.n_batches

    def __getitem__(self, i):
        i %= self.n_batches
        return self.x[i * 16 : (i + 1) * 16], self.y[i * 16 : (i + 1) * 16]

    def on_epoch_end(self):
        self.ends += 1


class Counting(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epochs = []

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append(epoch)


def model():
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    m.compile("sgd", "mse")
    return m


def codes(guard):
    return sorted({f.code for f in guard.findings})


out = {}
keras.utils.set_random_seed(0)

# Guard on a too-short sequence (len 1 of 8 batches of data): KER001, printed with its fix.
stream = io.StringIO()
short = Batches(8, length=1)
short.x, short.y = X, Y  # holds 128 samples, serves 1 batch an epoch
guard = Guard(stream=stream)
model().fit(short, epochs=2, verbose=0, callbacks=[guard])
out["short"] = {"codes": codes(guard), "printed": stream.getvalue()}

# Guard on a healthy fit with EarlyStopping that stops: nothing to report.
guard = Guard(stream=None)
stopper = keras.callbacks.EarlyStopping(monitor="loss", patience=0, min_delta=10.0)
hist = model().fit(X, Y, batch_size=32, epochs=5, verbose=0, callbacks=[guard, stopper])
out["early_stop"] = {"codes": codes(guard), "epochs": len(hist.history["loss"])}

# Guard on an exhausted tf.data input: legacy stops after 1 epoch (KER003).
import tensorflow as tf  # noqa: E402

guard = Guard(stream=None)
ds = tf.data.Dataset.from_tensor_slices((X[:64], Y[:64])).batch(16)
hist = model().fit(ds, epochs=3, steps_per_epoch=10, verbose=0, callbacks=[guard])
epochs = [e.steps for e in guard.events if type(e).__name__ == "Epoch"]
out["exhausted"] = {"codes": codes(guard), "epochs": len(hist.history["loss"]), "steps": epochs}

# Guard on sys.maxsize: stopped before the first batch where the callback is reached in time.
guard = Guard(stream=None)
try:
    model().fit(Batches(4, length=sys.maxsize), steps_per_epoch=4, epochs=2, verbose=0, callbacks=[guard])
    out["huge"] = "trained"
except SequenceLenHugeError as exc:
    out["huge"] = f"SequenceLenHugeError: {exc.finding.code}"
except Exception as exc:  # the adapter failed before any callback ran (Keras 3 on torch)
    out["huge"] = type(exc).__name__

# LoopingSequence: 4 real batches x 3; fit by steps_per_epoch over 3 epochs.
inner = Batches(4)
looping = LoopingSequence(inner, multiple=3)
guard = Guard(stream=None)
model().fit(looping, steps_per_epoch=4, epochs=3, verbose=0, callbacks=[guard])
out["looping"] = {
    "len": len(looping),
    "steps": [e.steps for e in guard.events if type(e).__name__ == "Epoch"],
    "served": looping.served,
    "inner_epoch_ends": inner.ends,
    "codes": codes(guard),
}
if not LEGACY:  # PyDataset workers: threads, then processes
    inner = Batches(4, workers=2)
    looping = LoopingSequence(inner, multiple=3)
    hist = model().fit(looping, epochs=2, verbose=0)
    out["looping_threads"] = {"workers": looping.workers, "epochs": len(hist.history["loss"])}
    inner = Batches(4, workers=2, use_multiprocessing=True)
    looping = LoopingSequence(inner, multiple=2)
    hist = model().fit(looping, epochs=2, verbose=0)
    out["looping_processes"] = {
        "multiprocessing": looping.use_multiprocessing,
        "epochs": len(hist.history["loss"]),
    }

# Deferred: every 2 epochs and once at the end; or only at the end.
every, end_only = Counting(), Counting()
model().fit(X, Y, epochs=5, verbose=0, callbacks=[Deferred(every, every=2), Deferred(end_only)])
out["deferred"] = {"every2": every.epochs, "end_only": end_only.epochs}

print("RESULT " + json.dumps(out))
