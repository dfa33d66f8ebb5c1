"""Time to resume mid-epoch: trainmedic positions the sampler; replaying batches is what others do.

A dataset whose samples cost real work to load (decoding, augmentation: here ~0.2 ms
of arithmetic each). A checkpoint is taken at the start of an epoch and at 90 % of
it; the time from `fit(...)` to the first step after resuming is measured for each.
The replay baseline iterates the DataLoader over the 90 % as a skip-by-replay
resume does. Target (issue #5): 90 % equal to the start, within noise.

    python benchmarks/train_resume_time.py --batches 500
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

import torch
from torch import nn
from trainmedic.train import fit


class Costly(Dataset):
    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int):
        x = torch.full((64,), float(i % 97))
        for _ in range(20):  # stands in for decoding and augmentation
            x = torch.tanh(x * 1.01)
        return x, i % 10


def run(directory: str, batches: int, max_steps: int, resume: bool) -> float:
    torch.manual_seed(0)
    model = nn.Linear(64, 10)
    loader = DataLoader(Costly(batches * 16), batch_size=16, shuffle=True)
    started = time.perf_counter()
    fit(
        model,
        loader,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        loss_fn=F.cross_entropy,
        max_steps=max_steps,
        checkpoint_dir=directory,
        resume="auto" if resume else None,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    at = {"start": 1, "90%": int(args.batches * 0.9)}
    results: dict[str, list[float]] = {name: [] for name in at}
    replay: list[float] = []
    with tempfile.TemporaryDirectory() as root:
        for name, step in at.items():
            run(f"{root}/{name}", args.batches, step, resume=False)  # leaves a checkpoint at `step`
        for _ in range(args.rounds):
            for name, step in at.items():
                results[name].append(run(f"{root}/{name}", args.batches, step + 1, resume=True))
                for newer in Path(f"{root}/{name}").glob(f"step-{step + 1:08d}.*"):
                    newer.unlink()  # the next round resumes from the same point again
            loader = DataLoader(Costly(args.batches * 16), batch_size=16, shuffle=True)
            started = time.perf_counter()
            for i, _ in enumerate(loader):
                if i + 1 >= at["90%"]:
                    break
            replay.append(time.perf_counter() - started)
    start, ninety = statistics.median(results["start"]), statistics.median(results["90%"])
    print(f"resume + 1 step, epoch of {args.batches} batches, median of {args.rounds}:")
    print(f"  at the start of the epoch   {start * 1e3:8.1f} ms")
    print(f"  at 90 % of the epoch        {ninety * 1e3:8.1f} ms   ({ninety / start:.2f}x the start)")
    print(f"  replaying 90 % of the batches (skip-by-replay) {statistics.median(replay) * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
