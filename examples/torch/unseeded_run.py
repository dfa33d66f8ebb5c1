"""TOR008 (info): the run never seeds torch, so two runs cannot be compared."""

from common import FIXED, MLP, make_data, make_loader, train_epoch

import torch


def main(fixed=FIXED):
    if fixed:
        torch.manual_seed(1234)
    x, y = make_data()
    model = MLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    print(f"loss {train_epoch(model, make_loader(x, y, seed=0), optimizer):.3f}")


if __name__ == "__main__":
    main()
