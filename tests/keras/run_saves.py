"""Keras 3 saves under the boot module (`tests/keras/test_saves.py`), each failure beside its
healthy twin, in ONE interpreter (TensorFlow imported once). Prints `DONE` at the end; every
file goes into OUT (argv[1]).

- `seq.keras`: a Sequential model fitted on arrays, `model.save`: healthy.
- `func.keras` each epoch (`ModelCheckpoint`, a functional model fitted on a `tf.data.Dataset`)
  and `best.weights.h5` (`ModelCheckpoint(save_best_only=True, save_weights_only=True)`):
  healthy.
- `moved.keras`: saved, then trained on at once with a large learning rate: healthy (the
  reference is the model as saved).
- `registered.keras`: a custom layer registered in an importable module: healthy.
- `config-lost.keras`: a registered custom layer whose `get_config()` leaves out an argument
  of its `__init__`: it reloads with the default, and its outputs differ (TOR015 outputs-differ).
- `main-registered.keras`: a custom layer registered in this script: not reloadable by another
  process, skipped.
- `custom.keras`: a custom layer NOT registered: `load_model` fails (TOR015 reload-failed).
- `subclassed.keras`: a subclassed model NOT registered: the same.
- `float16.keras`: a model under the "float16" dtype policy whose BatchNormalization
  moving_variance overflowed to inf in training: TOR015 nonfinite; `mixed16.keras`, the same
  under "mixed_float16" (float32 variables): healthy.
- `custom_layer_not_registered/model.keras` and `..._fixed/model.keras`: the example and its
  fix (`examples/keras/`), `ModelCheckpoint` each epoch: TOR015 reload-failed, then nothing.
- `off.keras`: an unregistered layer saved with TRAINMEDIC_SAVE_CHECKS=0: not checked.
"""

import os
import runpy
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

import keras

sys.path.insert(0, str(Path(__file__).resolve().parent))
import save_layers

OUT = Path(sys.argv[1])
OUT.mkdir(parents=True, exist_ok=True)
keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
X = rng.normal(size=(128, 4)).astype("float32")
Y = (X.sum(axis=1, keepdims=True) > 0).astype("float32")


class Scale(keras.layers.Layer):  # not registered
    def __init__(self, units=3, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, shape):
        self.w = self.add_weight(shape=(shape[-1], self.units), initializer="random_normal")

    def call(self, x):
        return x @ self.w


@keras.saving.register_keras_serializable(package="script")
class Shift(keras.layers.Layer):  # registered, in this script only
    def call(self, x):
        return x + 1.0


class Sub(keras.Model):  # not registered
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = keras.layers.Dense(8, activation="relu")
        self.out = keras.layers.Dense(1)

    def call(self, x):
        return self.out(self.hidden(x))


def fitted(*layers, lr=0.01, epochs=2):
    model = keras.Sequential([keras.Input((4,)), *layers, keras.layers.Dense(1, activation="sigmoid")])
    model.compile(keras.optimizers.SGD(lr), "binary_crossentropy")
    model.fit(X, Y, batch_size=32, epochs=epochs, verbose=0)
    return model


fitted(keras.layers.Dense(8, activation="relu")).save(OUT / "seq.keras")

inputs = keras.Input((4,))
outputs = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Dense(8, activation="relu")(inputs))
functional = keras.Model(inputs, outputs)
functional.compile("adam", "binary_crossentropy")
data = tf.data.Dataset.from_tensor_slices((X, Y)).batch(32)
functional.fit(
    data,
    epochs=3,
    verbose=0,
    validation_data=data,
    callbacks=[
        keras.callbacks.ModelCheckpoint(str(OUT / "func.keras")),
        keras.callbacks.ModelCheckpoint(
            str(OUT / "best.weights.h5"), save_best_only=True, save_weights_only=True, monitor="val_loss"
        ),
    ],
)

moved = fitted(keras.layers.Dense(8, activation="relu"))
moved.save(OUT / "moved.keras")
moved.optimizer.learning_rate.assign(50.0)
moved.fit(X, Y, batch_size=32, epochs=2, verbose=0)

fitted(save_layers.Doubling()).save(OUT / "registered.keras")
fitted(keras.layers.Dense(2), save_layers.Temperature(4.0)).save(OUT / "config-lost.keras")
fitted(Shift()).save(OUT / "main-registered.keras")
fitted(Scale(3)).save(OUT / "custom.keras")

sub = Sub()
sub.compile("sgd", "mse")
sub.fit(X, Y, batch_size=32, epochs=1, verbose=0)
sub.save(OUT / "subclassed.keras")

LOUD = (rng.normal(size=(256, 4)) * 1000 + 500).astype("float32")
LOUD_Y = (LOUD[:, :1] > 500).astype("float32")
for policy, name in (("float16", "float16.keras"), ("mixed_float16", "mixed16.keras")):
    keras.config.set_dtype_policy(policy)
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.BatchNormalization(), keras.layers.Dense(1, activation="sigmoid")]
    )
    keras.config.set_dtype_policy("float32")
    model.compile("sgd", "binary_crossentropy")
    model.fit(LOUD, LOUD_Y, batch_size=32, epochs=3, verbose=0)
    print(policy, "moving_variance", model.layers[0].moving_variance.numpy().tolist())
    model.save(OUT / name)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "keras"
for example in ("custom_layer_not_registered", "custom_layer_not_registered_fixed"):
    sys.argv = [str(EXAMPLES / f"{example}.py"), "--out", str(OUT / example)]
    runpy.run_path(sys.argv[0], run_name="__main__")

os.environ["TRAINMEDIC_SAVE_CHECKS"] = "0"
fitted(Scale(2)).save(OUT / "off.keras")
os.environ.pop("TRAINMEDIC_SAVE_CHECKS")
print("DONE")
