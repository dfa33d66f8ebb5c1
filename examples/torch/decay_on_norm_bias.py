"""TOR007 (info): AdamW's weight decay also shrinks biases and LayerNorm parameters."""

from common import FIXED, make_data, make_loader, train_epoch

import torch
from torch import nn


def main(fixed=FIXED):
    torch.manual_seed(0)
    x, y = make_data()
    model = nn.Sequential(nn.Linear(20, 64), nn.LayerNorm(64), nn.ReLU(), nn.Linear(64, 4))
    if fixed:
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}]
    else:
        groups = [{"params": list(model.parameters()), "weight_decay": 0.05}]
    optimizer = torch.optim.AdamW(groups, lr=1e-3)
    for epoch in range(2):
        print(f"epoch {epoch} loss {train_epoch(model, make_loader(x, y, seed=epoch), optimizer):.3f}")


if __name__ == "__main__":
    main()
