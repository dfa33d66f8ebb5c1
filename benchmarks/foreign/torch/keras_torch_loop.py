"""A Keras 3 model trained by a plain PyTorch loop (the style of Keras' custom-loop-in-PyTorch guide).

KERAS_BACKEND=torch: the Keras layers are torch modules and their weights torch
parameters. The loop reads batches from a torch DataLoader, computes the loss with
torch, calls backward() and lets a *Keras* optimizer apply the gradients: no
torch.optim anywhere.

Bug `no-zero-grad`: `model.zero_grad()` is left out, so each update applies the sum of
all past gradients: TOR003.
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
keras.utils.set_random_seed(7)
torch.manual_seed(7)

# Synthetic 10-class problem: the class is the argmax of a fixed projection of the input.
x = torch.randn(1024, 32)
y = (x @ torch.randn(32, 10)).argmax(dim=1)
train_dataloader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)

model = keras.Sequential(
    [
        keras.Input(shape=(32,)),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dropout(0.1),
        keras.layers.Dense(10),
    ]
)
optimizer = keras.optimizers.Adam(learning_rate=1e-3)
loss_fn = torch.nn.CrossEntropyLoss()

for epoch in range(args.epochs):
    for inputs, targets in train_dataloader:
        logits = model(inputs, training=True)
        loss = loss_fn(logits, targets)
        if args.bug != "no-zero-grad":
            model.zero_grad()
        loss.backward()
        trainable_weights = list(model.trainable_weights)
        gradients = [v.value.grad for v in trainable_weights]
        with torch.no_grad():
            optimizer.apply(gradients, trainable_weights)
    print(f"epoch {epoch}: loss {loss.item():.4f}")
