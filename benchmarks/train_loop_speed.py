"""Step time of trainmedic.train.fit against a hand-written loop, Lightning Trainer and Fabric.

Same model, data, optimizer and steps for each; the loops run interleaved (the order
rotating each round), several rounds, and the median per-step time of each is
compared with the hand loop's. Both wall time and the process's CPU time are
measured: on a shared machine CPU time is the steadier of the two.
Targets (issue #5): fit <= 1.03x the hand loop, faster than Lightning Trainer.

    python benchmarks/train_loop_speed.py --steps 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import logging
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


def hand_loop(model: nn.Module, loader: DataLoader) -> None:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    for step, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 10 == 0:
            _ = loss.item()  # what every hand loop logs


def trainmedic_fit(model: nn.Module, loader: DataLoader) -> None:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    fit(model, loader, optimizer=optimizer, loss_fn=F.cross_entropy, epochs=1, resume=None)


def lightning_trainer(model: nn.Module, loader: DataLoader) -> None:
    import lightning as L

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = model

        def training_step(self, batch, _):
            x, y = batch
            return F.cross_entropy(self.net(x), y)

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
        loss = F.cross_entropy(model(x), y)
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
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    logging.getLogger("lightning.fabric").setLevel(logging.ERROR)
    for kind, make in (("mlp", mlp), ("cnn", cnn)):
        if kind not in args.models.split(","):
            continue
        times: dict[str, list[float]] = {name: [] for name in LOOPS}
        for loop in LOOPS.values():  # warm-up: imports, first allocations
            torch.manual_seed(0)
            loop(make(), data(kind, 20, args.batch))
        cpu: dict[str, list[float]] = {name: [] for name in LOOPS}
        names = list(LOOPS)
        for round_ in range(args.rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                torch.manual_seed(0)
                model, loader = make(), data(kind, args.steps, args.batch)
                started, started_cpu = time.perf_counter(), time.process_time()
                LOOPS[name](model, loader)
                times[name].append((time.perf_counter() - started) / args.steps)
                cpu[name].append((time.process_time() - started_cpu) / args.steps)
        hand, hand_cpu = statistics.median(times["hand loop"]), statistics.median(cpu["hand loop"])
        print(
            f"{kind}: {args.steps} steps x {args.rounds} rounds, batch {args.batch}, {args.threads} thread(s)"
        )
        print(f"  {'':18s} {'wall ms/step':>12s} {'ratio':>6s} {'CPU ms/step':>12s} {'ratio':>6s}")
        for name in names:
            wall, used = statistics.median(times[name]), statistics.median(cpu[name])
            ratios = f"{wall / hand:6.2f} {used * 1e3:12.3f} {used / hand_cpu:6.2f}"
            print(f"  {name:18s} {wall * 1e3:12.3f} {ratios}")


if __name__ == "__main__":
    main()
