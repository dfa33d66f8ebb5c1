"""TOR005: DistributedSampler without set_epoch: every epoch sees the same order.

Run under torchrun (`torchrun --nproc-per-node 2 sampler_epoch_not_set.py`, gloo
on CPU) or alone (one replica).
"""

import os

import torch.distributed as dist
from common import FIXED, MLP, make_data
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import torch
from torch import nn


def main(fixed=FIXED):
    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    torch.manual_seed(0)
    x, y = make_data()
    dataset = TensorDataset(x, y)
    sampler = (
        DistributedSampler(dataset, shuffle=True, seed=0)
        if distributed
        else (DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True, seed=0))
    )
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    model = MLP()
    if distributed:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(3):
        if fixed:
            sampler.set_epoch(epoch)
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
        print(f"rank {os.environ.get('RANK', '0')} epoch {epoch} loss {loss.item():.3f}")
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
