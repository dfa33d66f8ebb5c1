"""A plain PyTorch loop converted to Lightning Fabric, in the style of Fabric's docs.

`L.Fabric(accelerator="cpu")`, `fabric.launch()`, `fabric.setup(model, optimizer)` and
`fabric.setup_dataloaders`, `fabric.backward(loss)` in place of `loss.backward()`, a
`MultiStepLR` schedule stepped once per epoch, `fabric.print` of the test accuracy each
epoch, `fabric.save` of the final state.

Healthy as written (the scheduler steps at the end of each epoch). `--bug scheduler-first`
steps it at the top of each epoch instead, before the epoch's first `optimizer.step()`: the
first learning-rate value is skipped (TOR006 scheduler-before-optimizer).

Data: scikit-learn's bundled 8x8 digits, standardised.
"""

import argparse
import os
import tempfile

import lightning as L
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["scheduler-first"], default=None)
parser.add_argument("--epochs", type=int, default=4)
args = parser.parse_args()

fabric = L.Fabric(accelerator="cpu", devices=1)
fabric.launch()
fabric.seed_everything(0)

x, y = load_digits(return_X_y=True)
x = torch.tensor(x / 16.0, dtype=torch.float32)
y = torch.tensor(y)
train_loader = DataLoader(TensorDataset(x[:1500], y[:1500]), batch_size=50, shuffle=True)
test_loader = DataLoader(TensorDataset(x[1500:], y[1500:]), batch_size=300)

model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2, 3], gamma=0.3)
model, optimizer = fabric.setup(model, optimizer)
train_loader, test_loader = fabric.setup_dataloaders(train_loader, test_loader)

for epoch in range(args.epochs):
    if args.bug == "scheduler-first":
        scheduler.step()  # "the new epoch's learning rate first"
    model.train()
    for data, target in train_loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(data), target)
        fabric.backward(loss)
        optimizer.step()
    if args.bug != "scheduler-first":
        scheduler.step()

    model.eval()
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            correct += int((model(data).argmax(dim=1) == target).sum())
    fabric.print(
        f"epoch {epoch}: loss {loss.item():.3f}, test accuracy {correct / len(test_loader.dataset):.3f}"
    )

fabric.save(
    os.path.join(tempfile.mkdtemp(prefix="fabric-"), "model.ckpt"), {"model": model, "optimizer": optimizer}
)
