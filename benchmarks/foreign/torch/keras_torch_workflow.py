"""A Keras convnet trained by torch's own optimizer and loss, in the style of Keras' custom torch
workflow demo (`KERAS_BACKEND=torch`).

The Keras layers are torch modules: `torch.optim.Adam(model.parameters())` trains them and
`nn.CrossEntropyLoss` scores them. The labels are one-hot rows (`keras.utils.to_categorical`,
the Keras habit), which torch's cross-entropy takes as class probabilities. Data: the 8x8
digits shipped with scikit-learn, scaled to [0, 1]; the running loss is printed every 10
batches, as the demo does.

Bug `shuffled-labels`: the labels are permuted apart from the images (a sort applied to one
array only): the model cannot learn them, and the loss stays at chance, ln 10 (TRN003).

Run: KERAS_BACKEND=torch python keras_torch_workflow.py [--bug shuffled-labels]
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import numpy as np
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

import keras
import torch
from keras import layers
from torch import nn, optim

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["shuffled-labels"], default=None)
args = parser.parse_args()

num_classes = 10
learning_rate = 0.01
batch_size = 16
num_epochs = 1


def get_data() -> DataLoader:
    digits = load_digits()
    images = np.expand_dims(digits.images.astype("float32") / 16.0, -1)
    labels = digits.target
    if args.bug == "shuffled-labels":
        labels = np.random.default_rng(0).permutation(labels)
    targets = keras.utils.to_categorical(labels, num_classes)
    dataset = TensorDataset(torch.from_numpy(images), torch.from_numpy(targets))
    return DataLoader(dataset, batch_size=batch_size, shuffle=True)


def get_model() -> keras.Model:
    return keras.Sequential(
        [
            layers.Input(shape=(8, 8, 1)),
            layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
            layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Flatten(),
            layers.Dropout(0.5),
            layers.Dense(num_classes),
        ]
    )


def train(model, train_loader, num_epochs, optimizer, loss_fn) -> None:
    for epoch in range(num_epochs):
        running_loss = 0.0
        for batch_idx, (inputs, targets) in enumerate(train_loader):
            outputs = model(inputs)
            loss = loss_fn(outputs, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
            if (batch_idx + 1) % 10 == 0:
                print(
                    f"Epoch [{epoch + 1}/{num_epochs}], Batch [{batch_idx + 1}/{len(train_loader)}], "
                    f"Loss: {running_loss / 10:.4f}"
                )
                running_loss = 0.0


if __name__ == "__main__":
    keras.utils.set_random_seed(1)
    loader = get_data()
    model = get_model()
    optimizer = optim.Adam(model.parameters(), lr=learning_rate)
    train(model, loader, num_epochs, optimizer, nn.CrossEntropyLoss())
