"""A Keras model that overrides `train_step` (TensorFlow backend), in the style of the Keras
guide "Customizing what happens in fit()": the forward pass and the compiled loss
(`self.compute_loss`) under `tf.GradientTape`, the gradients applied with
`self.optimizer.apply`, a `keras.metrics.Mean` loss tracker listed in `metrics` so that
Keras resets it every epoch, and `fit` as usual.

Healthy as written: features and target standardised with the training statistics, SGD with
momentum. `--bug raw-target` leaves the target in its original units (25 to 346): the squared
errors are ~10^4 times larger, so are the gradients, and with the same learning rate the
weights overshoot within the first epoch: the loss jumps from ~4e4 at the first step to
~1e33, then creeps down but ends more than 10^20 times above its start, all finite (TRN002
loss-divergence, measured from the first step's loss since Keras logs epoch means).

Data: scikit-learn's bundled diabetes table (442 rows, 10 features).
"""

import argparse

import tensorflow as tf
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

import keras

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["raw-target"], default=None)
parser.add_argument("--epochs", type=int, default=6)
args = parser.parse_args()

loss_tracker = keras.metrics.Mean(name="loss")
mae_metric = keras.metrics.MeanAbsoluteError(name="mae")


class CustomModel(keras.Model):
    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
        gradients = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply(gradients, self.trainable_variables)
        loss_tracker.update_state(loss)
        mae_metric.update_state(y, y_pred)
        return {"loss": loss_tracker.result(), "mae": mae_metric.result()}

    @property
    def metrics(self):
        return [loss_tracker, mae_metric]


x, y = load_diabetes(return_X_y=True)
x_train, _, y_train, _ = train_test_split(x, y.reshape(-1, 1), test_size=0.2, random_state=0)
x_train = (x_train - x_train.mean(axis=0)) / x_train.std(axis=0)
if args.bug != "raw-target":
    y_train = (y_train - y_train.mean()) / y_train.std()

keras.utils.set_random_seed(0)
inputs = keras.Input(shape=(x.shape[1],))
h = keras.layers.Dense(32, activation="relu")(inputs)
h = keras.layers.Dense(32, activation="relu")(h)
model = CustomModel(inputs, keras.layers.Dense(1)(h))
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.01, momentum=0.9), loss="mse")
model.fit(x_train.astype("float32"), y_train.astype("float32"), batch_size=16, epochs=args.epochs, verbose=2)
