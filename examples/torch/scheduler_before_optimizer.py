"""TOR006: scheduler.step() is called before optimizer.step(): the first LR value is skipped."""

from common import FIXED, MLP, make_data, make_loader

import torch
from torch import nn


def main(fixed=FIXED):
    torch.manual_seed(0)
    x, y = make_data()
    model = MLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 20))
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(3):
        model.train()
        for xb, yb in make_loader(x, y, seed=epoch):
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            if fixed:
                optimizer.step()
                scheduler.step()
            else:
                scheduler.step()
                optimizer.step()
        print(f"epoch {epoch} lr {scheduler.get_last_lr()[0]:.4f}")


if __name__ == "__main__":
    main()
