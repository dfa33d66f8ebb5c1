"""Data and model shared by the distributed script and the single-process reference."""

from __future__ import annotations

from torch.utils.data import TensorDataset

import torch
from torch import nn

EPOCHS, PER_RANK_BATCH, WORLD = 3, 5, 2


def dataset() -> TensorDataset:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(40, 6, generator=generator)
    return TensorDataset(x, (x[:, 0] - x[:, 2] > 0).long())


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2))
