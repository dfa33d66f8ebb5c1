"""A tabular regression under torchrun, in the style of PyTorch's DDP tutorial series (CPU, gloo).

A `Trainer` wraps an MLP in DistributedDataParallel, a DistributedSampler shards the rows, and
each epoch calls `set_epoch` and trains with `F.mse_loss`. The table is generated here in the
shape of California housing (8 numeric features, 8,192 districts; the value depends on income,
rooms, occupancy and location, with noise), features and target standardised.

Bug: `shuffled-targets` pairs each row's features with another row's value (the target column
shuffled on its own while the table was assembled): the loss falls to the targets' variance,
the loss of predicting their mean, and stays there for the three epochs on both ranks
(TRN003 not-learning, at the mean prediction's loss).

Run: torchrun --nproc-per-node 2 ddp_regression.py [--bug shuffled-targets]
"""

from __future__ import annotations

import argparse
import os

import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["shuffled-targets"], default=None)
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()


def housing(rows: int = 8192) -> TensorDataset:
    gen = torch.Generator().manual_seed(0)
    income = 0.5 + torch.randn(rows, generator=gen).abs() * 2.5 + torch.rand(rows, generator=gen) * 2.0
    age = torch.randint(1, 52, (rows,), generator=gen).float()
    rooms = 5.0 + torch.randn(rows, generator=gen).abs() * 1.5
    bedrooms = 1.0 + 0.1 * torch.randn(rows, generator=gen).abs()
    population = torch.exp(7.0 + 0.7 * torch.randn(rows, generator=gen))
    occupancy = 2.0 + torch.randn(rows, generator=gen).abs()
    latitude = 32.5 + 9.0 * torch.rand(rows, generator=gen)
    longitude = -124.3 + 10.0 * torch.rand(rows, generator=gen)
    coast = torch.exp(-((longitude + 122.0) ** 2 + (latitude - 37.5) ** 2) / 8.0)
    value = 0.45 * income + 0.1 * rooms - 0.3 * occupancy + 0.008 * age + 1.5 * coast
    value = value + 0.35 * torch.randn(rows, generator=gen)
    x = torch.stack([income, age, rooms, bedrooms, population.log(), occupancy, latitude, longitude], 1)
    x = (x - x.mean(0)) / x.std(0)
    y = ((value - value.mean()) / value.std()).unsqueeze(1)
    if args.bug == "shuffled-targets":
        y = y[torch.randperm(rows, generator=gen)]
    return TensorDataset(x, y)


class Trainer:
    def __init__(
        self, model: torch.nn.Module, train_data: DataLoader, optimizer: torch.optim.Optimizer
    ) -> None:
        self.rank = int(os.environ["LOCAL_RANK"])
        self.train_data = train_data
        self.optimizer = optimizer
        self.model = DDP(model)

    def _run_batch(self, source: torch.Tensor, targets: torch.Tensor) -> float:
        self.optimizer.zero_grad()
        loss = F.mse_loss(self.model(source), targets)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch: int) -> None:
        self.train_data.sampler.set_epoch(epoch)
        losses = [self._run_batch(source, targets) for source, targets in self.train_data]
        print(f"[rank{self.rank}] epoch {epoch} | steps {len(losses)} | mse {sum(losses) / len(losses):.4f}")

    def train(self, max_epochs: int) -> None:
        for epoch in range(max_epochs):
            self._run_epoch(epoch)


def main() -> None:
    dist.init_process_group(backend="gloo")
    torch.manual_seed(0)
    dataset = housing()
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 1),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(dataset, batch_size=64, shuffle=False, sampler=DistributedSampler(dataset))
    Trainer(model, loader, optimizer).train(args.epochs)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
