"""Forward-Forward training, layer by layer (the style of PyTorch's mnist_forward_forward example).

scikit-learn's 8x8 digits, the label written into the first 10 pixels: positive samples
carry the true label, negative ones a wrong one. Each layer is an `nn.Linear` with its own
Adam and its own local loss, softplus(threshold - goodness) on positive and
softplus(goodness - threshold) on negative samples, where the goodness is the mean squared
activation; it trains full-batch for all its iterations before the next layer starts on
its detached outputs. There is no end-to-end backward: each layer's optimizer is the
training in turn. A test image is classified by the label whose overlay makes the most
goodness over all layers.

Bug `layer-no-zero-grad`: the layers after the first leave `zero_grad()` out, so each of
their updates applies the sum of all their past gradients: TOR003, in the second layer's
training.
"""

from __future__ import annotations

import argparse

import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["layer-no-zero-grad"], default=None)
parser.add_argument("--iterations", type=int, default=300, help="full-batch updates per layer")
args = parser.parse_args()
torch.manual_seed(1234)
CLASSES = 10


def embed_label(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The images with their first 10 pixels replaced by a one-hot of `labels`."""
    out = images.clone()
    out[:, :CLASSES] = 0.0
    out[torch.arange(len(images)), labels] = images.max()
    return out


class FFLayer(nn.Linear):
    def __init__(self, features: int, units: int, index: int) -> None:
        super().__init__(features, units)
        self.index = index
        self.opt = torch.optim.Adam(self.parameters(), lr=0.03)
        self.threshold = 2.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        direction = x / (x.norm(dim=1, keepdim=True) + 1e-4)  # only the direction goes on
        return F.relu(super().forward(direction))

    def goodness(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).pow(2).mean(dim=1)

    def fit(self, positive: torch.Tensor, negative: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        for iteration in range(args.iterations):
            margins = torch.cat(
                [self.threshold - self.goodness(positive), self.goodness(negative) - self.threshold]
            )
            loss = F.softplus(margins).mean()
            if args.bug != "layer-no-zero-grad" or self.index == 0:
                self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            if iteration % 100 == 0:
                print(f"layer {self.index} iteration {iteration}: loss {loss.item():.4f}")
        with torch.no_grad():
            return self(positive), self(negative)


digits = load_digits()
images = torch.tensor((digits.data / 16.0 - 0.3) / 0.4, dtype=torch.float32)
labels = torch.tensor(digits.target)
x_train, x_test, y_train, y_test = train_test_split(images, labels, test_size=0.25, random_state=0)
wrong = (y_train + torch.randint(1, CLASSES, y_train.shape)) % CLASSES
layers = [FFLayer(64, 256, 0), FFLayer(256, 256, 1)]

positive, negative = embed_label(x_train, y_train), embed_label(x_train, wrong)
for layer in layers:
    positive, negative = layer.fit(positive, negative)

with torch.no_grad():
    scores = []
    for label in range(CLASSES):
        h = embed_label(x_test, torch.full((len(x_test),), label))
        total = torch.zeros(len(x_test))
        for layer in layers:
            h = layer(h)
            total += h.pow(2).mean(dim=1)
        scores.append(total)
    accuracy = (torch.stack(scores, dim=1).argmax(dim=1) == y_test).float().mean().item()
print(f"test accuracy {accuracy:.3f}")
