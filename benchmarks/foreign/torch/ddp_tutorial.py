"""DDP under torchrun, in the style of PyTorch's multi-GPU DDP tutorial (CPU, gloo).

A `Trainer` wraps a linear model in DistributedDataParallel, a DistributedSampler
shards the data, and each epoch first reads the batch size from one peeked batch
(`len(next(iter(loader))[0])`), then calls `set_epoch(epoch)` and trains: the peek is
legitimate and must not be reported. The target is a noisy linear function of the
input (mean-squared error).

Bugs: `single-class-ce` trains the one-column output with F.cross_entropy (loss 0.0
and no gradient: TOR009); `no-set-epoch` drops `set_epoch` (TOR005); `no-zero-grad`
drops `optimizer.zero_grad()` (TOR003); `placeholder-data` keeps the tutorial's own
placeholder data, inputs and targets drawn apart (2,048 rows, batches of 32, SGD at 1e-3),
with an initialisation (seed 11) whose first predictions already lie near the targets'
level, as 3 of the first 12 seeds do (the tutorial sets none): the loss stays flat at 1.4x
the variance of the targets, what predicting their mean would cost, for the three epochs
(TRN003). From a start far above (seed 0) the loss is still falling after three epochs:
that run is learning the mean, and is not reported.

Run: torchrun --nproc-per-node 2 ddp_tutorial.py [--bug ...]
"""

from __future__ import annotations

import argparse
import os

import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

import torch

parser = argparse.ArgumentParser()
parser.add_argument(
    "--bug", choices=["single-class-ce", "no-set-epoch", "no-zero-grad", "placeholder-data"], default=None
)
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()


class MyTrainDataset(Dataset):
    def __init__(self, size: int) -> None:
        gen = torch.Generator().manual_seed(0)
        weight = torch.randn(20, 1, generator=gen)
        self.data = []
        for _ in range(size):
            x = torch.rand(20, generator=gen)
            if args.bug == "placeholder-data":  # a target that says nothing of its input
                self.data.append((x, torch.rand(1, generator=gen)))
            else:
                self.data.append((x, x @ weight + 0.05 * torch.randn(1, generator=gen)))

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int):
        return self.data[index]


class Trainer:
    def __init__(
        self, model: torch.nn.Module, train_data: DataLoader, optimizer: torch.optim.Optimizer
    ) -> None:
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.train_data = train_data
        self.optimizer = optimizer
        self.model = DDP(model)

    def _run_batch(self, source: torch.Tensor, targets: torch.Tensor) -> None:
        if args.bug != "no-zero-grad":
            self.optimizer.zero_grad()
        output = self.model(source)
        if args.bug == "single-class-ce":
            loss = F.cross_entropy(output, targets)
        else:
            loss = F.mse_loss(output, targets)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self, epoch: int) -> None:
        b_sz = len(next(iter(self.train_data))[0])
        if args.bug != "no-set-epoch":
            self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            self._run_batch(source, targets)
        print(f"[rank{self.gpu_id}] epoch {epoch} | batch size {b_sz} | steps {len(self.train_data)}")

    def train(self, max_epochs: int) -> None:
        for epoch in range(max_epochs):
            self._run_epoch(epoch)


def main() -> None:
    dist.init_process_group(backend="gloo")
    placeholder = args.bug == "placeholder-data"
    torch.manual_seed(11 if placeholder else 0)
    dataset = MyTrainDataset(2048 if placeholder else 1024)
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3 if placeholder else 1e-2)
    loader = DataLoader(
        dataset,
        batch_size=32 if placeholder else 16,
        pin_memory=False,
        shuffle=False,
        sampler=DistributedSampler(dataset),
    )
    Trainer(model, loader, optimizer).train(args.epochs)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
