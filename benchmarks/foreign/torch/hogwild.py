"""Hogwild training: two processes update one shared model (the style of PyTorch's mnist_hogwild).

The model's parameters are moved to shared memory (`share_memory()`) and two
`torch.multiprocessing` workers each train them with their own DataLoader and SGD
optimizer, without locks; the parent joins them and tests the model (8x8 digits). Each
worker is a trainer of its own: trainmedic's guard runs in both.

Bug `no-zero-grad`: the workers leave `optimizer.zero_grad()` out: TOR003.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch.multiprocessing as mp
import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["no-zero-grad"], default=None)
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--epochs", type=int, default=6)


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )  # fmt: skip
        self.classifier = nn.Sequential(nn.Flatten(), nn.Dropout(0.25), nn.Linear(128, 64), nn.ReLU())
        self.out = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.out(self.classifier(self.features(x))), dim=1)


def worker(rank: int, model: nn.Module, data: TensorDataset, epochs: int, bug: str | None) -> None:
    """One Hogwild worker: its own seed, loader and optimizer over the shared parameters."""
    torch.manual_seed(100 + rank)
    torch.set_num_threads(1)
    loader = DataLoader(data, batch_size=32, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.5)
    model.train()
    for epoch in range(epochs):
        for i, (images, labels) in enumerate(loader):
            if bug != "no-zero-grad":
                optimizer.zero_grad()
            loss = F.nll_loss(model(images), labels)
            loss.backward()
            optimizer.step()
            if i % 20 == 0:
                print(f"worker {rank} epoch {epoch} batch {i}: loss {loss.item():.4f}", flush=True)


def evaluate(model: nn.Module, data: TensorDataset) -> float:
    model.eval()
    images, labels = data.tensors
    with torch.no_grad():
        return (model(images).argmax(dim=1) == labels).float().mean().item()


if __name__ == "__main__":
    args = parser.parse_args()
    torch.manual_seed(1)
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]
    x_train, x_test, y_train, y_test = train_test_split(images, digits.target, test_size=0.2, random_state=0)
    train_set = TensorDataset(torch.from_numpy(x_train), torch.from_numpy(y_train))
    test_set = TensorDataset(torch.from_numpy(x_test), torch.from_numpy(y_test))
    model = ConvNet()
    model.share_memory()
    workers = [
        mp.Process(target=worker, args=(rank, model, train_set, args.epochs, args.bug))
        for rank in range(args.workers)
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join()
    print(f"test accuracy {evaluate(model, test_set):.3f}")
