"""Polynomial regression by hand, stopped when the loss is small (the style of PyTorch's regression example).

One `nn.Linear` fits y = w . (x, x^2, x^3, x^4) + b on random batches; parameters are
updated with `param.data.add_(-lr * param.grad)`, no torch.optim; the loop stops when
the batch loss falls below 1e-3.

Bug `no-zero-grad`: `fc.zero_grad()` is left out, so every update applies the sum of
all past gradients: TOR003.
"""

from __future__ import annotations

import argparse
from itertools import count

import torch.nn.functional as F

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["no-zero-grad"], default=None)
args = parser.parse_args()
torch.manual_seed(0)

POLY_DEGREE = 4
W_target = torch.randn(POLY_DEGREE, 1) * 5
b_target = torch.randn(1) * 5


def make_features(x: torch.Tensor) -> torch.Tensor:
    x = x.unsqueeze(1)
    return torch.cat([x**i for i in range(1, POLY_DEGREE + 1)], 1)


def f(x: torch.Tensor) -> torch.Tensor:
    return x.mm(W_target) + b_target.item()


def get_batch(batch_size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    x = make_features(torch.randn(batch_size))
    return x, f(x)


fc = torch.nn.Linear(W_target.size(0), 1)
for batch_idx in count(1):
    batch_x, batch_y = get_batch()
    if args.bug != "no-zero-grad":
        fc.zero_grad()
    output = F.smooth_l1_loss(fc(batch_x), batch_y)
    loss = output.item()
    output.backward()
    for param in fc.parameters():
        param.data.add_(-0.1 * param.grad)
    if loss < 1e-3 or batch_idx >= 400:
        break
print(f"Loss: {loss:.6f} after {batch_idx} batches")
