"""TRN008: a deep sigmoid MLP: the first layers' gradients are ~1e-8 of the last layer's.

`--fixed` uses ReLU and a residual-free but shallower net.
"""

from common import FIXED, make_data, make_loader, train_epoch

import torch
from torch import nn


def deep(act, depth):
    layers = [nn.Linear(20, 32), act()]
    for _ in range(depth):
        layers += [nn.Linear(32, 32), act()]
    return nn.Sequential(*layers, nn.Linear(32, 4))


def main(fixed=FIXED):
    torch.manual_seed(0)
    x, y = make_data()
    model = deep(nn.ReLU, 3) if fixed else deep(nn.Sigmoid, 14)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(3):
        print(f"epoch {epoch} loss {train_epoch(model, make_loader(x, y, seed=epoch), optimizer):.3f}")


if __name__ == "__main__":
    main()
