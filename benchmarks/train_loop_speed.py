"""Step time of trainmedic.train.fit against a hand-written loop, Lightning Trainer and Fabric.

Like with like: the same model (same seed), data, AdamW, `zero_grad(set_to_none=True)`,
number of steps and one torch thread for each; every loop's first run (imports, first
allocations) is discarded; the loops run interleaved, the order rotating each round.

Three measures, each as a ratio to the hand loop:
- wall and CPU time of the whole run (setup included), median over the rounds;
- the median CPU time *of one step*: the loss function, the same in every loop, notes
  the thread's CPU clock at each call; the median of the intervals (the first 20 steps
  of a run left out) is the per-step cost without the setup, and it is the figure least
  moved by other jobs on a shared machine (a preempted step is one outlier among
  thousands, not a slower run).
Targets (issue #5): fit <= 1.03x the hand loop, faster than Lightning Trainer.

    python benchmarks/train_loop_speed.py --steps 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import statistics
import tempfile
import time
import warnings

import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn
from trainmedic.train import fit


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))


def cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 4 * 4, 10),
    )


def data(kind: str, steps: int, batch: int) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    n = steps * batch
    x = torch.randn(n, 32, generator=g) if kind == "mlp" else torch.randn(n, 1, 16, 16, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=batch, shuffle=True)


STAMPS: list[int] = []  # thread CPU clock at each loss computation, in ns


def loss_fn(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    STAMPS.append(time.thread_time_ns())
    return F.cross_entropy(outputs, targets)


def hand_loop(model: nn.Module, loader: DataLoader) -> None:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    for step, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 10 == 0:
            _ = loss.item()  # what every hand loop logs


def trainmedic_fit(model: nn.Module, loader: DataLoader) -> None:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    fit(model, loader, optimizer=optimizer, loss_fn=loss_fn, epochs=1, resume=None)


def lightning_trainer(model: nn.Module, loader: DataLoader) -> None:
    import lightning as L

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = model

        def training_step(self, batch, _):
            x, y = batch
            return loss_fn(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    with tempfile.TemporaryDirectory() as root:
        trainer = L.Trainer(
            max_epochs=1,
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_progress_bar=False,
            enable_checkpointing=False,
            enable_model_summary=False,
            default_root_dir=root,
        )
        trainer.fit(Module(), loader)


def lightning_fabric(model: nn.Module, loader: DataLoader) -> None:
    from lightning.fabric import Fabric

    fabric = Fabric(accelerator="cpu", devices=1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = fabric.setup(model, optimizer)
    loader = fabric.setup_dataloaders(loader)
    model.train()
    for step, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y)
        fabric.backward(loss)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 10 == 0:
            _ = loss.item()


LOOPS = {
    "hand loop": hand_loop,
    "trainmedic fit": trainmedic_fit,
    "Lightning Trainer": lightning_trainer,
    "Lightning Fabric": lightning_fabric,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--models", default="mlp,cnn", help="comma-separated: mlp, cnn")
    parser.add_argument("--loops", default=",".join(LOOPS), help="comma-separated, from: " + ", ".join(LOOPS))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    logging.getLogger("lightning.fabric").setLevel(logging.ERROR)
    names = [name for name in LOOPS if name in args.loops.split(",")]
    assert names[0] == "hand loop", "the hand loop is the reference"
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for kind, make in (("mlp", mlp), ("cnn", cnn)):
        if kind not in args.models.split(","):
            continue
        for name in names:  # warm-up, not timed: imports, first allocations
            torch.manual_seed(0)
            LOOPS[name](make(), data(kind, 20, args.batch))
        wall: dict[str, list[float]] = {name: [] for name in names}
        cpu: dict[str, list[float]] = {name: [] for name in names}
        step_cpu: dict[str, list[float]] = {name: [] for name in names}
        for round_ in range(args.rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                torch.manual_seed(0)
                model, loader = make(), data(kind, args.steps, args.batch)
                STAMPS.clear()
                started, started_cpu = time.perf_counter(), time.process_time()
                LOOPS[name](model, loader)
                wall[name].append((time.perf_counter() - started) / args.steps)
                cpu[name].append((time.process_time() - started_cpu) / args.steps)
                assert len(STAMPS) == args.steps, (name, len(STAMPS))
                step_cpu[name] += [(b - a) / 1e9 for a, b in itertools.pairwise(STAMPS[20:])]

        figures = {
            name: {
                "wall": statistics.median(wall[name]),
                "cpu": statistics.median(cpu[name]),
                "step": statistics.median(step_cpu[name]),
                "p25": statistics.quantiles(step_cpu[name], n=4)[0],
            }
            for name in names
        }
        hand = figures["hand loop"]
        print(
            f"{kind}: {args.steps} steps x {args.rounds} rounds, batch {args.batch}, {args.threads} thread(s)"
        )
        print(
            "  ms and ratio to the hand loop: wall/step, CPU/step (whole runs); one step's CPU: median, p25"
        )
        for name in names:
            cells = [f"{v * 1e3:8.3f} {v / hand[m]:5.3f}" for m, v in figures[name].items()]
            print(f"  {name:18s} " + "   ".join(cells))
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
