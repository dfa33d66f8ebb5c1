"""TOR003: optimizer.zero_grad() is missing, so every step applies the sum of all past gradients."""

from common import FIXED, MLP, make_data, make_loader

import torch
from torch import nn


def main(fixed=FIXED):
    torch.manual_seed(0)
    x, y = make_data()
    model = MLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(3):
        model.train()
        for xb, yb in make_loader(x, y, seed=epoch):
            if fixed:
                optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
