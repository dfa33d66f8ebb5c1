"""A `torch.compile`d model in a plain loop (the style of PyTorch's torch.compile tutorial).

A small MLP compiled once (backend given by TM_COMPILE_BACKEND, default "inductor"),
trained with Adam on synthetic classification data from a DataLoader.

Bug `no-zero-grad`: `optimizer.zero_grad()` is left out: TOR003.
"""

from __future__ import annotations

import argparse
import os

from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["no-zero-grad"], default=None)
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()
torch.manual_seed(0)

x = torch.randn(640, 20)
y = (x @ torch.randn(20, 3)).argmax(dim=1)
loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)

model = nn.Sequential(nn.Linear(20, 32), nn.GELU(), nn.Linear(32, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
compiled = torch.compile(model, backend=os.environ.get("TM_COMPILE_BACKEND", "inductor"))
criterion = nn.CrossEntropyLoss()

for epoch in range(args.epochs):
    for inputs, targets in loader:
        if args.bug != "no-zero-grad":
            opt.zero_grad(set_to_none=True)
        loss = criterion(compiled(inputs), targets)
        loss.backward()
        opt.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")
