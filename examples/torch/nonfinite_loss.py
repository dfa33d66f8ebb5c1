"""TRN001: one corrupt row (NaN) in the data turns the loss NaN at the step that draws it.

The guard reports the step and the batch's dataset indices. `--fixed` drops
rows that are not finite before training.
"""

from common import FIXED, MLP, make_data, make_loader, train_epoch

import torch


def main(fixed=FIXED):
    torch.manual_seed(0)
    x, y = make_data()
    x[137, 3] = float("nan")  # one bad sensor reading
    if fixed:
        keep = torch.isfinite(x).all(dim=1)
        x, y = x[keep], y[keep]
    model = MLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        print(f"epoch {epoch} loss {train_epoch(model, make_loader(x, y, seed=epoch), optimizer):.3f}")


if __name__ == "__main__":
    main()
