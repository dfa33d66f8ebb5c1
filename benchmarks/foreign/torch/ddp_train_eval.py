"""DDP under torchrun with one `_run_epoch` for training and evaluation (the minGPT-ddp style; CPU, gloo).

A `Trainer` holds a training and a test DataLoader, each sharded by its own
DistributedSampler. Every epoch runs `_run_epoch(epoch, train_loader, train=True)` and
then `_run_epoch(epoch, test_loader, train=False)`; the batch step runs forward under
`torch.set_grad_enabled(train)` and steps the optimizer only when training. `set_epoch`
is called on the training loader's sampler only: the evaluation order does not matter,
so that is healthy and must not be reported. The task: a small MLP learns a 4-class
label that is the argmax of a fixed projection of the input (cross-entropy).

Bug `no-set-epoch`: the training sampler's `set_epoch` is left out too, so every epoch
repeats the first epoch's order on every rank (TOR005).

Run: torchrun --nproc-per-node 2 ddp_train_eval.py [--bug no-set-epoch]
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
parser.add_argument("--bug", choices=["no-set-epoch"], default=None)
parser.add_argument("--epochs", type=int, default=4)
args = parser.parse_args()


def make_dataset(size: int, seed: int) -> TensorDataset:
    projection = torch.randn(16, 4, generator=torch.Generator().manual_seed(0))
    x = torch.randn(size, 16, generator=torch.Generator().manual_seed(seed))
    return TensorDataset(x, (x @ projection).argmax(dim=1))


class Trainer:
    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.model = DDP(model)
        self.optimizer = optimizer
        self.train_loader = self._prepare_dataloader(make_dataset(2048, 1))
        self.test_loader = self._prepare_dataloader(make_dataset(512, 2))

    @staticmethod
    def _prepare_dataloader(dataset: TensorDataset) -> DataLoader:
        return DataLoader(dataset, batch_size=32, shuffle=False, sampler=DistributedSampler(dataset))

    def _run_batch(self, source: torch.Tensor, targets: torch.Tensor, train: bool = True) -> float:
        with torch.set_grad_enabled(train):
            logits = self.model(source)
            loss = F.cross_entropy(logits, targets)
        if train:
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
        return loss.item()

    def _run_epoch(self, epoch: int, dataloader: DataLoader, train: bool = True) -> None:
        if train and args.bug != "no-set-epoch":
            dataloader.sampler.set_epoch(epoch)
        total = 0.0
        for source, targets in dataloader:
            total += self._run_batch(source, targets, train)
        step_type = "Train" if train else "Eval"
        print(f"[rank{self.local_rank}] epoch {epoch} | {step_type} loss {total / len(dataloader):.4f}")

    def train(self, max_epochs: int) -> None:
        for epoch in range(max_epochs):
            self.model.train()
            self._run_epoch(epoch, self.train_loader, train=True)
            self.model.eval()
            self._run_epoch(epoch, self.test_loader, train=False)


def main() -> None:
    dist.init_process_group(backend="gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    Trainer(model, optimizer).train(args.epochs)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
