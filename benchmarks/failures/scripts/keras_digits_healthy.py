"""A healthy control in the structure of the official Keras example "Simple MNIST convnet"
(keras.io/examples/vision/mnist_convnet: scale the images to [0, 1], add the channel axis,
one-hot labels, two Conv2D + MaxPooling2D blocks, Flatten, Dropout(0.5), a softmax Dense,
`model.fit(..., validation_split=0.1)`, then `model.evaluate` on the test set) on real images:
scikit-learn's bundled 8x8 handwritten digits, split 80/20 with train_test_split (no download).
"""

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import keras
from keras import layers

keras.utils.set_random_seed(1)
num_classes = 10
input_shape = (8, 8, 1)

digits = load_digits()
x_train, x_test, y_train, y_test = train_test_split(
    digits.images, digits.target, test_size=0.2, random_state=1, stratify=digits.target
)
x_train = np.expand_dims(x_train.astype("float32") / 16.0, -1)
x_test = np.expand_dims(x_test.astype("float32") / 16.0, -1)
print("x_train shape:", x_train.shape)
y_train = keras.utils.to_categorical(y_train, num_classes)
y_test = keras.utils.to_categorical(y_test, num_classes)

model = keras.Sequential(
    [
        keras.Input(shape=input_shape),
        layers.Conv2D(16, kernel_size=(3, 3), activation="relu", padding="same"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(32, kernel_size=(3, 3), activation="relu", padding="same"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(num_classes, activation="softmax"),
    ]
)
model.summary()

batch_size = 64
epochs = 8
model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs, validation_split=0.1, verbose=2)

score = model.evaluate(x_test, y_test, verbose=0)
print("Test loss:", score[0])
print("Test accuracy:", score[1])
