"""A small residual convnet with batch normalisation (no dropout) in the style of the PyTorch
ImageNet example's training loop: SGD with Nesterov momentum and weight decay, `OneCycleLR`
stepped after every `optimizer.step()`, top-1 accuracy on a validation pass per epoch.

Healthy as written. `--bug no-train-mode` calls `model.train()` once before the epoch loop
instead of inside `train()`: the validation pass leaves the model in `eval()` mode, and from
the second epoch on batch norm normalises with its running statistics and stops updating
them (TOR002 eval-mode-training).

Data: scikit-learn's bundled 8x8 digits.
"""

import argparse

from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["no-train-mode"], default=None)
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()
torch.manual_seed(0)


class BasicBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + x)


model = nn.Sequential(
    nn.Conv2d(1, 16, 3, padding=1, bias=False),
    nn.BatchNorm2d(16),
    nn.ReLU(inplace=True),
    BasicBlock(16),
    BasicBlock(16),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
    nn.Linear(16, 10),
)
digits = load_digits()
images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
labels = torch.tensor(digits.target)
train_loader = DataLoader(TensorDataset(images[:1500], labels[:1500]), batch_size=64, shuffle=True)
val_loader = DataLoader(TensorDataset(images[1500:], labels[1500:]), batch_size=256)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.OneCycleLR(
    optimizer, max_lr=0.1, epochs=args.epochs, steps_per_epoch=len(train_loader)
)


def train(epoch):
    if args.bug != "no-train-mode":
        model.train()
    for images_, target in train_loader:
        loss = criterion(model(images_), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
    print(f"Epoch: [{epoch}] loss {loss.item():.4f}")


def validate():
    model.eval()
    correct = 0
    with torch.no_grad():
        for images_, target in val_loader:
            correct += int((model(images_).argmax(1) == target).sum())
    print(f" * Acc@1 {100.0 * correct / len(val_loader.dataset):.3f}")


if args.bug == "no-train-mode":
    model.train()
for epoch in range(args.epochs):
    train(epoch)
    validate()
