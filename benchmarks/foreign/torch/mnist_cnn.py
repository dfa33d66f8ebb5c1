"""A small convnet in the style of the PyTorch MNIST example: Adadelta, `StepLR` stepped once
per epoch after the epoch's optimizer steps, dropout, `log_softmax` with `nll_loss`, and a
test pass under `torch.no_grad()` after each epoch.

Healthy as written. `--bug scheduler-first` steps the scheduler at the top of each epoch,
before any `optimizer.step()` (the pre-1.1 PyTorch order still found in old tutorials): the
first learning rate is skipped (TOR006 scheduler-before-optimizer).

Data: scikit-learn's bundled 8x8 handwritten digits (1,797 images, 10 classes).
"""

import argparse

import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["scheduler-first"], default=None)
parser.add_argument("--epochs", type=int, default=4)
args = parser.parse_args()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1)
        self.conv2 = nn.Conv2d(16, 32, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(32 * 2 * 2, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(torch.flatten(x, 1))
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


def train(model, loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(loader):
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        if batch_idx % 10 == 0:
            seen = batch_idx * len(data)
            print(f"Train Epoch: {epoch} [{seen}/{len(loader.dataset)}]\tLoss: {loss.item():.6f}")


def test(model, loader):
    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in loader:
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            correct += int((output.argmax(dim=1) == target).sum())
    n = len(loader.dataset)
    print(f"Test set: Average loss: {test_loss / n:.4f}, Accuracy: {correct}/{n}")


torch.manual_seed(1)
digits = load_digits()
images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
images = (images - 0.3) / 0.4  # roughly zero mean, unit variance, as the example normalises
labels = torch.tensor(digits.target)
train_loader = DataLoader(TensorDataset(images[:1500], labels[:1500]), batch_size=64, shuffle=True)
test_loader = DataLoader(TensorDataset(images[1500:], labels[1500:]), batch_size=256)

model = Net()
optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
for epoch in range(1, args.epochs + 1):
    if args.bug == "scheduler-first":
        scheduler.step()
    train(model, train_loader, optimizer, epoch)
    test(model, test_loader)
    if args.bug != "scheduler-first":
        scheduler.step()
