"""Keras Sequential convnet on MNIST-shaped synthetic digits (28x28, 10 classes).

Healthy as written. `--bug shuffled-labels` shuffles the labels on their own (a
`np.random.shuffle(y_train)` meant for both arrays): the labels no longer belong to the
images, the loss sits at chance level ln 10 = 2.303 for every epoch (TRN003 not-learning,
with the chance level from the compiled loss and the output width).

Synthetic data: each class is a fixed random 28x28 template plus noise.
"""

import argparse

import numpy as np

import keras

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["shuffled-labels"], default=None)
parser.add_argument("--epochs", type=int, default=4)
args = parser.parse_args()

num_classes = 10
input_shape = (28, 28, 1)
rng = np.random.default_rng(0)
templates = rng.uniform(0, 1, size=(num_classes, 28, 28, 1)).astype("float32")
y_train = rng.integers(0, num_classes, size=4096)
x_train = np.clip(templates[y_train] + 0.5 * rng.normal(size=(4096, 28, 28, 1)), 0, 1).astype("float32")
if args.bug == "shuffled-labels":
    rng.shuffle(y_train)  # meant to shuffle the pairs; x_train keeps its order
y_train = keras.utils.to_categorical(y_train, num_classes)

keras.utils.set_random_seed(1)
model = keras.Sequential(
    [
        keras.Input(shape=input_shape),
        keras.layers.Conv2D(8, kernel_size=(3, 3), activation="relu"),
        keras.layers.MaxPooling2D(pool_size=(2, 2)),
        keras.layers.Conv2D(16, kernel_size=(3, 3), activation="relu"),
        keras.layers.MaxPooling2D(pool_size=(2, 2)),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.5),
        keras.layers.Dense(num_classes, activation="softmax"),
    ]
)
model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=128, epochs=args.epochs, validation_split=0.1, verbose=2)
