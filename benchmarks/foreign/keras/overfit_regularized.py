"""Keras regularised MLP in the style of the TensorFlow "Overfit and underfit" tutorial.

A binary classifier on a noisy tabular problem: dense layers with L2 weight penalties and
dropout, Adam with an `InverseTimeDecay` schedule, `binary_crossentropy` from logits,
validation on held-out rows every epoch.

Healthy as written: 3,200 training rows, the validation loss follows the training loss down.
`--bug debug-subset` leaves in the line that cut the training set to 96 rows for a quick
debugging run: the network memorises them (its noisy labels included) and the validation
loss turns up after a few epochs while the training loss keeps falling (TRN004 overfitting).

Synthetic data: scikit-learn's `make_classification` (20 features, 10 % flipped labels).
"""

import argparse

from sklearn.datasets import make_classification

import keras

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["debug-subset"], default=None)
parser.add_argument("--epochs", type=int, default=15)
args = parser.parse_args()

x, y = make_classification(
    n_samples=4000, n_features=20, n_informative=8, flip_y=0.1, class_sep=0.8, random_state=0
)
x, y = x.astype("float32"), y.astype("float32")
x_train, y_train, x_val, y_val = x[:3200], y[:3200], x[3200:], y[3200:]
if args.bug == "debug-subset":
    x_train, y_train = x_train[:96], y_train[:96]  # "quick run while debugging", never removed

keras.utils.set_random_seed(0)
regularizer = keras.regularizers.l2(1e-4)
model = keras.Sequential(
    [
        keras.Input(shape=(x.shape[1],)),
        keras.layers.Dense(256, activation="elu", kernel_regularizer=regularizer),
        keras.layers.Dropout(0.3),
        keras.layers.Dense(256, activation="elu", kernel_regularizer=regularizer),
        keras.layers.Dropout(0.3),
        keras.layers.Dense(1),
    ]
)
schedule = keras.optimizers.schedules.InverseTimeDecay(1e-3, decay_steps=500, decay_rate=1)
model.compile(
    optimizer=keras.optimizers.Adam(schedule),
    loss=keras.losses.BinaryCrossentropy(from_logits=True),
    metrics=[keras.metrics.BinaryAccuracy(threshold=0.0, name="accuracy")],
)
history = model.fit(
    x_train, y_train, batch_size=32, epochs=args.epochs, validation_data=(x_val, y_val), verbose=2
)
print(f"val loss {history.history['val_loss'][-1]:.3f}, accuracy {history.history['val_accuracy'][-1]:.3f}")
