"""TOR009: a one-column output trained with cross-entropy (softmax over one class: loss 0, no gradient)."""

import torch.nn.functional as F
from common import FIXED, make_data, make_loader

import torch
from torch import nn


def main(fixed=FIXED):
    torch.manual_seed(0)
    x, y = make_data(classes=2)
    # The bug: one output for a two-class problem, as if cross_entropy took a single logit.
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2 if fixed else 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        for inputs, targets in make_loader(x, y, seed=epoch):
            optimizer.zero_grad()
            logits = model(inputs)
            loss = F.cross_entropy(logits, targets if fixed else targets.float().unsqueeze(1))
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
