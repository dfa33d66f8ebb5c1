"""Child of test_batch_windows.py: one fit with Keras' own train_step, one with a model's own.

The recorder's clock is replaced by one that advances 0.4 s per read, so it reads the logs
every third batch whatever the machine's speed; a user callback records every batch's logs.
Prints one JSON line: the Step events and the per-batch logs of each fit.
"""

import json
import sys

import numpy as np

import keras
import trainmedic.keras._recorder as recorder
from trainmedic.events import Step
from trainmedic.keras._auto import install


class Clock:
    now = 0.0

    def perf_counter(self) -> float:
        self.now += 0.4
        return self.now


recorder.time = Clock()  # type: ignore[assignment]
events: list = []
install(keras, sink=events.append)


class Raw(keras.Model):
    """A model whose own train_step returns the batch's loss, not a running mean."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = keras.layers.Dense(8, activation="relu")
        self.out = keras.layers.Dense(1, activation="sigmoid")

    def call(self, x):
        return self.out(self.hidden(x))

    def train_step(self, data):
        import tensorflow as tf

        x, y = data
        with tf.GradientTape() as tape:
            loss = keras.losses.binary_crossentropy(tf.reshape(y, (-1, 1)), self(x, training=True))
            loss = tf.reduce_mean(loss)
        self.optimizer.apply(tape.gradient(loss, self.trainable_variables), self.trainable_variables)
        return {"loss": loss}


class Logs(keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[float] = []

    def on_train_batch_end(self, batch, logs=None):
        self.seen.append(float(logs["loss"]))


rng = np.random.default_rng(0)
x = rng.normal(size=(320, 4)).astype("float32")
y = (x.sum(1) > 0).astype("float32")
out = {}
for name in ("keras", "own"):
    if name == "keras":
        model = keras.Sequential(
            [
                keras.Input((4,)),
                keras.layers.Dense(8, activation="relu"),
                keras.layers.Dense(1, activation="sigmoid"),
            ]
        )
    else:
        model = Raw()
    model.compile(optimizer="adam", loss="binary_crossentropy")
    logs = Logs()
    start = len(events)
    model.fit(x, y, epochs=2, batch_size=32, verbose=0, callbacks=[logs])
    steps = [e for e in events[start:] if isinstance(e, Step)]
    out[name] = {
        "logs": logs.seen,
        "steps": [{"step": s.step, "loss": s.metrics["loss"], "window": s.window} for s in steps],
    }
print(json.dumps(out))
sys.stdout.flush()
