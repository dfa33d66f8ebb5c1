"""A Keras 3 model trained by torch.optim.Adam in a plain PyTorch loop (KERAS_BACKEND=torch).

Keras' layers are torch modules there, so a `keras.Sequential` can be trained like any torch
model: `torch.optim.Adam(model.parameters())`, `CrossEntropyLoss`, `backward()`, `step()`.
Its `Dropout` layer owns a seed generator whose state is an integer tensor among
`model.parameters()`: the guard must measure the float weights beside it and stay on.
The task: a 10-class label that is the argmax of a fixed projection of the input.

Bug `no-zero-grad`: `optimizer.zero_grad()` is left out, so every update applies the sum of
all past gradients (TOR003).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "torch")

from torch.utils.data import DataLoader, TensorDataset

import keras
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["no-zero-grad"], default=None)
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()
keras.utils.set_random_seed(3)
torch.manual_seed(3)

x = torch.randn(2048, 32)
y = (x @ torch.randn(32, 10)).argmax(dim=1)
loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)

model = keras.Sequential(
    [
        keras.Input(shape=(32,)),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(10),
    ]
)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = torch.nn.CrossEntropyLoss()

for epoch in range(args.epochs):
    total = 0.0
    for inputs, targets in loader:
        if args.bug != "no-zero-grad":
            optimizer.zero_grad()
        loss = loss_fn(model(inputs, training=True), targets)
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"epoch {epoch}: loss {total / len(loader):.4f}")
