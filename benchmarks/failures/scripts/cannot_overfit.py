"""The tiny-batch overfit test fails: a ReLU after the output layer of a regressor.

Karpathy's recipe ("overfit one batch") catches models that cannot represent the
targets: here the last layer is followed by a ReLU, so negative targets are out
of reach and the loss on one batch of 16 examples stays far from zero.
"""

import sys

import torch
from torch import nn
from trainmedic.torch import overfit_batch

torch.manual_seed(0)
x = torch.randn(16, 8)
y = x @ torch.randn(8, 1)  # about half the targets are negative
fixed = "--fixed" in sys.argv
layers: list[nn.Module] = [nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 1)]
if not fixed:
    layers.append(nn.ReLU())  # the bug
model = nn.Sequential(*layers)
result = overfit_batch(model, (x, y), nn.functional.mse_loss, steps=300)
print(f"overfit test: loss {result.initial_loss:.4f} -> {result.final_loss:.4f}, passed={result.passed}")
