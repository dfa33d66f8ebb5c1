"""TRN011: fp16 autocast with a GradScaler that skips nearly every step (NaN gradients).

A small MLP on a distance feature, `sqrt(sum(x**2))`, trained with fp16 autocast and
`torch.amp.GradScaler`. Some inputs are all-zero rows (padding): the gradient of
`sqrt` at 0 is inf, times 0 it is NaN, so the scaler finds non-finite gradients
on nearly every batch, skips the update and halves the scale. The loss stays
finite; the weights barely move. `--fixed` computes the norm with
`torch.linalg.vector_norm` (its gradient at 0 is 0): the scale settles after a
few early skips.
"""

from common import FIXED, make_loader

import torch
from torch import nn


def data(n=768, features=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    y = (x[:, :4].sum(dim=1) > 0).long()
    x[::16] = 0.0  # padding rows: one in sixteen
    return x, y


class DistanceMLP(nn.Module):
    def __init__(self, fixed, features=16, hidden=64):
        super().__init__()
        self.fixed = fixed
        self.proj = nn.Linear(features, features)
        self.weight = nn.Parameter(torch.ones(features))  # a learned scale per feature
        self.body = nn.Sequential(nn.Linear(features + 1, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def forward(self, x):
        h = self.proj(x)
        if self.fixed:
            radius = torch.linalg.vector_norm(x * self.weight, dim=1, keepdim=True)
        else:
            radius = (x * self.weight).pow(2).sum(dim=1, keepdim=True).sqrt()  # NaN gradient at a zero row
        return self.body(torch.cat([h, radius], dim=1))


def main(fixed=FIXED, epochs=5):
    torch.manual_seed(0)
    x, y = data()
    loader = make_loader(x, y, batch_size=32)
    model = DistanceMLP(fixed)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu")
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        for xb, yb in loader:
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = loss_fn(model(xb), yb)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        print(f"epoch {epoch}: loss {loss.item():.4f} scale {scaler.get_scale():g}")


if __name__ == "__main__":
    main()
