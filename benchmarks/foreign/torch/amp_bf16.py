"""Mixed precision on CPU: bf16 autocast and the GradScaler pattern (the style of PyTorch's AMP recipe).

The recipe's loop: forward and loss under `torch.autocast(device_type="cpu",
dtype=torch.bfloat16)`, `scaler.scale(loss).backward()`, `scaler.unscale_` then
clipping, `scaler.step(optimizer)`, `scaler.update()`, `zero_grad(set_to_none=True)`.
bf16 needs no loss scaling, so the scaler is built disabled (the recipe's `enabled=`
switch), as code that also runs fp16 on a GPU does. Synthetic regression data.

Bugs: `no-train-mode`: evaluate() switches to eval() and training never switches
back: TOR002. `no-zero-grad`: `opt.zero_grad()` is left out (the scaler's unscale_ and
the clipping still rewrite the gradients in place every step): TOR003.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["no-train-mode", "no-zero-grad"], default=None)
parser.add_argument("--epochs", type=int, default=4)
args = parser.parse_args()
torch.manual_seed(0)

in_size, out_size, batch_size, num_batches = 32, 8, 16, 30
data = [torch.randn(batch_size, in_size) for _ in range(num_batches)]
projection = torch.randn(in_size, out_size)
targets = [torch.tanh(d @ projection) for d in data]
held_out = torch.randn(64, in_size)

net = nn.Sequential(nn.Linear(in_size, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, out_size))
opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
loss_fn = nn.MSELoss()
scaler = torch.amp.GradScaler("cpu", enabled=False)  # fp16 on a GPU would enable it


def evaluate() -> float:
    net.eval()
    with torch.no_grad(), torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        return float(loss_fn(net(held_out), torch.tanh(held_out @ projection)))


for epoch in range(args.epochs):
    if args.bug != "no-train-mode" or epoch == 0:
        net.train()
    for inputs, target in zip(data, targets, strict=True):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            output = net(inputs)
            loss = loss_fn(output, target)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=1.0)
        scaler.step(opt)
        scaler.update()
        if args.bug != "no-zero-grad":
            opt.zero_grad(set_to_none=True)
    print(f"epoch {epoch}: held-out loss {evaluate():.4f}")
