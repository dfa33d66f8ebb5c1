"""Shared pieces of the PyTorch examples: a small synthetic task and a small MLP.

Every example is a real training run on CPU that takes a second or two. Run one
bare, under `trainmedic run -- python examples/torch/<name>.py`, or with
`--fixed` to see the corrected loop.
"""

import sys

from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn

FIXED = "--fixed" in sys.argv


def make_data(n=512, features=20, classes=4, seed=0):
    """Linearly separable-ish classes from a fixed generator (no downloads)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    w = torch.randn(features, classes, generator=g)
    y = (x @ w).argmax(dim=1)
    return x, y


def make_loader(x, y, batch_size=32, shuffle=True, seed=0, **kwargs):
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(
        TensorDataset(x, y), batch_size=batch_size, shuffle=shuffle, generator=generator, **kwargs
    )


class MLP(nn.Module):
    def __init__(self, features=20, hidden=64, classes=4, dropout=0.1):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Dropout(dropout))
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.head(self.body(x))


def train_epoch(model, loader, optimizer, loss_fn=None):
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.item()
