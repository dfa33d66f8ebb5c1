"""TOR004: the model ends in Softmax and its probabilities go into CrossEntropyLoss."""

from common import FIXED, MLP, make_data, make_loader, train_epoch

import torch
from torch import nn


def main(fixed=FIXED):
    torch.manual_seed(0)
    x, y = make_data()
    model = MLP() if fixed else nn.Sequential(MLP(), nn.Softmax(dim=1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        print(f"epoch {epoch} loss {train_epoch(model, make_loader(x, y, seed=epoch), optimizer):.3f}")


if __name__ == "__main__":
    main()
