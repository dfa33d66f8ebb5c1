"""Keras functional regression on scikit-learn's bundled diabetes table, standardised.

Healthy as written: features and target standardised with the training statistics,
SGD with momentum, gradients clipped to norm 1, and an exponentially decaying learning rate (x0.9 per epoch).
`--bug lr-grows` types the decay rate as 1.9: the learning rate nearly doubles every epoch,
the updates start to overshoot, and the loss ends orders of magnitude above where it
started, all finite (TRN002 loss-divergence).
"""

import argparse

from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split

import keras

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["lr-grows"], default=None)
parser.add_argument("--epochs", type=int, default=8)
args = parser.parse_args()

x, y = load_diabetes(return_X_y=True)
x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=0)
mean, std = x_train.mean(axis=0), x_train.std(axis=0)
x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
y_mean, y_std = y_train.mean(), y_train.std()
y_train, y_test = (y_train - y_mean) / y_std, (y_test - y_mean) / y_std

keras.utils.set_random_seed(0)
inputs = keras.Input(shape=(x.shape[1],))
h = keras.layers.Dense(32, activation="relu")(inputs)
h = keras.layers.Dense(32, activation="relu")(h)
outputs = keras.layers.Dense(1)(h)
model = keras.Model(inputs, outputs)
schedule = keras.optimizers.schedules.ExponentialDecay(
    0.01, decay_steps=len(x_train) // 16, decay_rate=1.9 if args.bug == "lr-grows" else 0.9
)
model.compile(optimizer=keras.optimizers.SGD(learning_rate=schedule, momentum=0.9, clipnorm=1.0), loss="mse")
model.fit(x_train, y_train, batch_size=16, epochs=args.epochs, validation_data=(x_test, y_test), verbose=2)
