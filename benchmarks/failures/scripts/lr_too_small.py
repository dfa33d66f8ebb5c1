"""Not learning: a learning rate meant for fine-tuning (1e-6) used to train from scratch.

The loop is correct and the labels are learnable (a linear rule), but SGD at
1e-6 moves the weights by nothing: the training loss stays at its initial
level, epoch after epoch, and the run burns its budget. `--fixed` uses 0.1.
"""

import sys

import torch
from torch import nn

torch.manual_seed(0)
n = 1024
x = torch.randn(n, 16)
y = (x[:, 0] + x[:, 1] > 0).long()
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
lr = 0.1 if "--fixed" in sys.argv else 1e-6  # the bug: 1e-6
optimizer = torch.optim.SGD(model.parameters(), lr=lr)
loss_fn = nn.CrossEntropyLoss()
for epoch in range(8):
    for i in range(0, n, 32):
        optimizer.zero_grad()
        loss = loss_fn(model(x[i : i + 32]), y[i : i + 32])
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch + 1}: loss {loss.item():.4f}", flush=True)
