"""Gradient accumulation over 4 micro-batches, with a scheduler and per-epoch validation.

The common pattern: the loss is divided by the accumulation steps, `optimizer.step()`
and `zero_grad()` run every 4th backward, the scheduler steps after the optimizer, and
validation under `torch.no_grad()` follows each epoch (synthetic classification data).

Bug `no-train-mode`: validate() leaves the model in eval() mode and the loop never calls
model.train() again, so epochs 2+ train with dropout off: TOR002.
"""

from __future__ import annotations

import argparse

from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["no-train-mode"], default=None)
parser.add_argument("--epochs", type=int, default=4)
args = parser.parse_args()
torch.manual_seed(0)

ACCUMULATION_STEPS = 4
x = torch.randn(1536, 16)
y = (x[:, :4].sum(dim=1) > 0).long()
train_loader = DataLoader(TensorDataset(x[:1280], y[:1280]), batch_size=8, shuffle=True)
val_loader = DataLoader(TensorDataset(x[1280:], y[1280:]), batch_size=64)

model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 2))
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=20, gamma=0.8)
criterion = nn.CrossEntropyLoss()


def validate() -> float:
    model.eval()
    correct = 0
    with torch.no_grad():
        for inputs, targets in val_loader:
            correct += int((model(inputs).argmax(dim=1) == targets).sum())
    return correct / len(val_loader.dataset)


for epoch in range(args.epochs):
    if args.bug != "no-train-mode" or epoch == 0:
        model.train()
    optimizer.zero_grad()
    for i, (inputs, targets) in enumerate(train_loader):
        loss = criterion(model(inputs), targets) / ACCUMULATION_STEPS
        loss.backward()
        if (i + 1) % ACCUMULATION_STEPS == 0:
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
    print(f"epoch {epoch}: val accuracy {validate():.3f}")
