"""TOR001: only the head's parameters are given to the optimizer; the body never trains."""

from common import FIXED, MLP, make_data, make_loader, train_epoch

import torch


def main(fixed=FIXED):
    torch.manual_seed(0)
    x, y = make_data()
    model = MLP()
    params = model.parameters() if fixed else model.head.parameters()
    optimizer = torch.optim.SGD(params, lr=0.1)
    for epoch in range(3):
        print(f"epoch {epoch} loss {train_epoch(model, make_loader(x, y, seed=epoch), optimizer):.3f}")


if __name__ == "__main__":
    main()
