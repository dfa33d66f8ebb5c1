"""Step time of trainmedic.train.fit against a hand-written loop, Lightning Trainer and Fabric.

Same model, data, optimizer and steps for each; the loops run interleaved, several
rounds, and the median per-step time of each is compared with the hand loop's.
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

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

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
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    logging.getLogger("lightning.fabric").setLevel(logging.ERROR)
    for kind, make in (("mlp", mlp), ("cnn", cnn)):
        times: dict[str, list[float]] = {name: [] for name in LOOPS}
        for loop in LOOPS.values():  # warm-up: imports, first allocations
            torch.manual_seed(0)
            loop(make(), data(kind, 20, args.batch))
        for _ in range(args.rounds):
            for name, loop in LOOPS.items():
                torch.manual_seed(0)
                model, loader = make(), data(kind, args.steps, args.batch)
                started = time.perf_counter()
                loop(model, loader)
                times[name].append((time.perf_counter() - started) / args.steps)
        hand = statistics.median(times["hand loop"])
        print(
            f"{kind}: {args.steps} steps x {args.rounds} rounds, batch {args.batch}, {args.threads} thread(s)"
        )
        for name, values in times.items():
            median = statistics.median(values)
            print(f"  {name:18s} {median * 1e3:7.3f} ms/step   {median / hand:5.2f}x hand loop")


if __name__ == "__main__":
    main()
