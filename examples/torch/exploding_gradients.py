"""TRN007: a shard that missed normalisation (values 1000x too large) makes the gradient norm jump.

The loader is not shuffled, so the last third of every epoch comes from that
shard. `--fixed` clips the gradient norm to 1 (normalising the shard is better
still).
"""

from common import FIXED, MLP, make_data, make_loader

import torch
from torch import nn


def main(fixed=FIXED):
    torch.manual_seed(0)
    x, y = make_data()
    x[340:] *= 1000.0  # a shard without normalisation
    model = MLP(dropout=0.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(4):
        for xb, yb in make_loader(x, y, shuffle=False):
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            if fixed:
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        print(f"epoch {epoch} loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
