"""A tabular MLP on a scikit-learn table (the style of PyTorch's examples: a `TensorDataset`,
a shuffled `DataLoader`, Adam, a test pass per epoch).

scikit-learn's bundled breast-cancer table (569 rows, 30 features), standardised, split
80/20; a 2-layer MLP with dropout, `CrossEntropyLoss`, 6 epochs of batches of 32.

Bug `nan-row`: one training row holds a NaN (a missing sensor reading in column 7):
the loss turns NaN at the step that draws that row. That is the data's fault, not the
learning rate's: TRN001 naming the row and column, and no TRN007.
Bug `lr-far-too-high`: finite data, Adam at a learning rate of 1e3: the weights explode
and the loss turns non-finite: TRN001 (or TRN007) as for any explosion.
"""

from __future__ import annotations

import argparse

from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["nan-row", "lr-far-too-high"], default=None)
parser.add_argument("--epochs", type=int, default=6)
args = parser.parse_args()
torch.manual_seed(0)

x, y = load_breast_cancer(return_X_y=True)
x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
scaler = StandardScaler().fit(x_train)
x_train, x_test = scaler.transform(x_train), scaler.transform(x_test)
if args.bug == "nan-row":
    x_train[200, 7] = float("nan")  # a missing reading, after scaling: nothing imputes it

train_set = TensorDataset(torch.tensor(x_train, dtype=torch.float32), torch.tensor(y_train))
test_set = TensorDataset(torch.tensor(x_test, dtype=torch.float32), torch.tensor(y_test))
train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
test_loader = DataLoader(test_set, batch_size=128)


class Net(nn.Module):
    def __init__(self, features: int, hidden: int = 64) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(features, hidden), nn.ReLU(), nn.Dropout(0.2), nn.Linear(hidden, hidden), nn.ReLU()
        )
        self.head = nn.Linear(hidden, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


model = Net(x_train.shape[1])
lr = 1e3 if args.bug == "lr-far-too-high" else 1e-3
optimizer = torch.optim.Adam(model.parameters(), lr=lr)
criterion = nn.CrossEntropyLoss()


def train(epoch: int) -> None:
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        loss = criterion(model(data), target)
        loss.backward()
        optimizer.step()
        if batch_idx % 5 == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_set)}]\tLoss: {loss.item():.6f}")


def test() -> None:
    model.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for data, target in test_loader:
            correct += int((model(data).argmax(dim=1) == target).sum())
            total += len(target)
    print(f"Test set: Accuracy: {correct}/{total} ({100.0 * correct / total:.0f}%)")


for epoch in range(1, args.epochs + 1):
    train(epoch)
    test()
