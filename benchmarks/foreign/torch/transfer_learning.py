"""Fine-tuning a pretrained network as a fixed feature extractor, in the style of the PyTorch
transfer learning tutorial: the backbone's parameters get `requires_grad = False`, its final
layer is replaced by a new `nn.Linear` for the new classes, and only that layer is optimized
(SGD with momentum, `StepLR`), with a validation pass per epoch.

Healthy as written. `--bug optimizer-before-head` builds the optimizer before the head is
replaced: it holds the old head's parameters, the new head receives gradients that no
optimizer applies, and nothing trains (TOR001 frozen-parameters: trainable parameters
missing from the optimizer).

The "pretrained" backbone is a small convnet trained here for a few steps on a first task
(nothing is downloaded); the new task is scikit-learn's bundled 8x8 digits, 10 classes.
"""

import argparse

from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["optimizer-before-head"], default=None)
parser.add_argument("--epochs", type=int, default=4)
args = parser.parse_args()
torch.manual_seed(0)


class SmallNet(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten()
        )
        self.fc = nn.Linear(16 * 4 * 4, classes)

    def forward(self, x):
        return self.fc(self.features(x))


digits = load_digits()
images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
labels = torch.tensor(digits.target)

# "Pretraining": even/odd digits, a different task with a 2-way head.
model = SmallNet(2)
pre_opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(30):
    batch = torch.randint(0, 1500, (64,))
    pre_opt.zero_grad()
    nn.functional.cross_entropy(model(images[batch]), labels[batch] % 2).backward()
    pre_opt.step()

for param in model.parameters():
    param.requires_grad = False
if args.bug == "optimizer-before-head":
    optimizer = torch.optim.SGD(model.fc.parameters(), lr=0.05, momentum=0.9)
model.fc = nn.Linear(model.fc.in_features, 10)  # new parameters require grad by default
if args.bug != "optimizer-before-head":
    optimizer = torch.optim.SGD(model.fc.parameters(), lr=0.05, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
criterion = nn.CrossEntropyLoss()

train_loader = DataLoader(TensorDataset(images[:1500], labels[:1500]), batch_size=32, shuffle=True)
val_loader = DataLoader(TensorDataset(images[1500:], labels[1500:]), batch_size=256)
for epoch in range(args.epochs):
    model.train()
    for inputs, targets in train_loader:
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
    scheduler.step()
    model.eval()
    with torch.no_grad():
        correct = sum(int((model(x).argmax(1) == y).sum()) for x, y in val_loader)
    print(f"epoch {epoch}: train loss {loss.item():.3f}, val acc {correct / len(val_loader.dataset):.3f}")
