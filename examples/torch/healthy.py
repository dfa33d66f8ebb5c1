"""A healthy PyTorch loop: seeded, model.train(), zero_grad, scheduler after optimizer."""

from common import MLP, make_data, make_loader

import torch
from torch import nn


def main(epochs=5):
    torch.manual_seed(0)
    x, y = make_data()
    loader = make_loader(x[:448], y[:448])
    model = MLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
        scheduler.step()
        model.eval()
        with torch.no_grad():
            val = loss_fn(model(x[448:]), y[448:]).item()
        print(f"epoch {epoch} loss {loss.item():.3f} val_loss {val:.3f}")
    return model


if __name__ == "__main__":
    main()
