"""Regression on a scikit-learn table, tracked with Weights & Biases (the style of W&B's
PyTorch integration example: `wandb.init(config=...)`, `wandb.log` every few batches with
its step, a validation loss per epoch, `run.finish()`). The corpus runs it offline
(WANDB_MODE=offline): the run lands in ./wandb/offline-run-…/.

scikit-learn's bundled diabetes table (442 rows, 10 features), standardised, split 80/20,
target standardised; a 2-layer MLP, SGD with momentum, MSE, 8 epochs of batches of 32.
Healthy, trainmedic judges the curves it logs to W&B beside its own and stays quiet.

Bug `lr-too-high`: the learning rate typed as 0.5 for 0.005: with momentum the loss explodes
and turns NaN within the first epoch: TRN001 (the gradients explode first: TRN007).
"""

from __future__ import annotations

import argparse

import wandb
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["lr-too-high"], default=None)
parser.add_argument("--epochs", type=int, default=8)
args = parser.parse_args()
torch.manual_seed(0)

x, y = load_diabetes(return_X_y=True)
x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.2, random_state=0)
scaler = StandardScaler().fit(x_train)
mean, std = y_train.mean(), y_train.std()
train_set = TensorDataset(
    torch.tensor(scaler.transform(x_train), dtype=torch.float32),
    torch.tensor((y_train - mean) / std, dtype=torch.float32).unsqueeze(1),
)
val_set = TensorDataset(
    torch.tensor(scaler.transform(x_val), dtype=torch.float32),
    torch.tensor((y_val - mean) / std, dtype=torch.float32).unsqueeze(1),
)
train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
val_loader = DataLoader(val_set, batch_size=128)

params = {"lr": 0.5 if args.bug == "lr-too-high" else 0.005, "momentum": 0.9, "epochs": args.epochs}
model = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=params["lr"], momentum=params["momentum"])
loss_fn = nn.MSELoss()

run = wandb.init(project="diabetes-regression", config=params)
step = 0
for epoch in range(args.epochs):
    model.train()
    for data, target in train_loader:
        optimizer.zero_grad()
        loss = loss_fn(model(data), target)
        loss.backward()
        optimizer.step()
        if step % 2 == 0:
            wandb.log({"loss": loss.item()}, step=step)
        step += 1
    model.eval()
    with torch.no_grad():
        val_loss = sum(loss_fn(model(d), t).item() * len(t) for d, t in val_loader) / len(val_set)
    wandb.log({"val_loss": val_loss, "epoch": epoch}, step=step)
    print(f"epoch {epoch}: val_loss {val_loss:.4f}")
run.finish()
