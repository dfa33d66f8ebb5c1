"""TRN005: each sample is 'decoded' slowly in the main process; the model waits for data.

`--fixed` decodes once up front (a cache), as moving work out of the loop would.
"""

import time

from common import FIXED, MLP, make_data, make_loader, train_epoch
from torch.utils.data import DataLoader, Dataset

import torch


class SlowDataset(Dataset):
    def __init__(self, x, y, cost_s):
        self.x, self.y, self.cost_s = x, y, cost_s

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        time.sleep(self.cost_s)  # JPEG decoding, augmentation, a network filesystem...
        return self.x[i], self.y[i]


def main(fixed=FIXED):
    torch.manual_seed(0)
    x, y = make_data(n=256)
    if fixed:  # decoded once, up front: batches are slices of ready tensors
        loader = make_loader(x, y)
    else:
        loader = DataLoader(SlowDataset(x, y, 0.0005), batch_size=32, shuffle=True)
    model = MLP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(5):
        print(f"epoch {epoch} loss {train_epoch(model, loader, optimizer):.3f}")


if __name__ == "__main__":
    main()
