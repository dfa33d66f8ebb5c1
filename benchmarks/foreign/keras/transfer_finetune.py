"""Transfer learning, then fine-tuning, in three fits (the style of the Keras transfer-learning guide).

A small convolutional base is trained first on digits 0-4 (standing in for weights trained
elsewhere) at batch size 64. For digits 5-9 it is frozen (`base.trainable = False`, called
with `training=False` so its batch norm stays in inference mode), a new head is trained at
batch size 32, then the base is unfrozen, the model compiled again at a 10x lower learning
rate and fitted on, the epochs counted on with `initial_epoch`: three fits in one process,
two numbers of steps per epoch.

Bug `initial-epoch`: the fine-tuning fit is given the count of its new epochs as `epochs`
(`epochs=5, initial_epoch=5`): Keras' `epochs` is the index to stop at, so it trains no
epoch at all (KER003, a warning).
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import load_digits

import keras

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["initial-epoch"], default=None)
args = parser.parse_args()
keras.utils.set_random_seed(0)
HEAD_EPOCHS, FINE_EPOCHS = 4, 4

digits = load_digits()
images = (digits.images.astype("float32") / 16.0)[..., None]
labels = digits.target
source = labels < 5

base = keras.Sequential(
    [
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
        keras.layers.BatchNormalization(),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
    ],
    name="base",
)
pretrain = keras.Sequential([base, keras.layers.Dense(5, activation="softmax")])
pretrain.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
pretrain.fit(images[source], labels[source], epochs=6, batch_size=64, verbose=0)

order = np.random.default_rng(0).permutation(int((~source).sum()))
target_images, target_labels = images[~source][order], labels[~source][order] - 5
x_val, y_val = target_images[:200], target_labels[:200]
x_train, y_train = target_images[200:], target_labels[200:]

inputs = keras.Input((8, 8, 1))
features = base(inputs, training=False)
outputs = keras.layers.Dense(5, activation="softmax")(keras.layers.Dropout(0.2)(features))
model = keras.Model(inputs, outputs)

LOSS = "sparse_categorical_crossentropy"
base.trainable = False
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=LOSS, metrics=["accuracy"])
validation = (x_val, y_val)
head = model.fit(x_train, y_train, epochs=HEAD_EPOCHS, batch_size=32, validation_data=validation, verbose=2)

base.trainable = True
model.compile(optimizer=keras.optimizers.Adam(1e-4), loss=LOSS, metrics=["accuracy"])
last = FINE_EPOCHS if args.bug == "initial-epoch" else HEAD_EPOCHS + FINE_EPOCHS
fine = model.fit(
    x_train,
    y_train,
    epochs=last,
    initial_epoch=len(head.epoch),
    batch_size=32,
    validation_data=validation,
    verbose=2,
)
accuracy = model.evaluate(x_val, y_val, verbose=0)[1]
print(f"fine-tuning epochs {fine.epoch}; validation accuracy {accuracy:.3f}")
