"""TOR002: validation calls model.eval() and the loop never calls model.train() again."""

from common import FIXED, MLP, make_data, make_loader

import torch
from torch import nn


def main(fixed=FIXED):
    torch.manual_seed(0)
    x, y = make_data()
    loader = make_loader(x[:448], y[:448])
    model = MLP(dropout=0.3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for epoch in range(4):
        if fixed:
            model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            optimizer.step()
        model.eval()  # validation...
        with torch.no_grad():
            print(f"epoch {epoch} val_loss {loss_fn(model(x[448:]), y[448:]).item():.3f}")


if __name__ == "__main__":
    main()
