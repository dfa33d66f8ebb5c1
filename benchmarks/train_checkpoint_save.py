"""Checkpoint save throughput: trainmedic.checkpoint (atomic, fsynced, hashed) vs plain torch.save.

The same state (a model's weights and AdamW moments, ~3x the parameters) is saved
alternately by both into the same directory, several rounds; MB/s of each and the
ratio. plain torch.save is *not* fsynced: the comparison is against what people
do; `torch.save + fsync` is the durable baseline. Target (issue #5): >= 0.8x of plain
torch.save; when the disk is slower than the page cache, no fsynced write can reach
that, so trainmedic also offers `durable=False` (safe against kills, not power loss).

    python benchmarks/train_checkpoint_save.py --mb 200 --dir .
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch
from trainmedic.checkpoint import CheckpointManager


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200, help="size of the state in MB")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    args = parser.parse_args()
    floats = args.mb * 2**20 // 4 // 3
    state = {
        "model": {"w": torch.randn(floats)},
        "optimizer": {"exp_avg": torch.randn(floats), "exp_avg_sq": torch.rand(floats)},
        "step": 1,
    }
    names = ("plain torch.save", "torch.save + fsync", "trainmedic (fsync)", "trainmedic (fsync=False)")
    seconds: dict[str, list[float]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(dir=args.dir) as root:
        durable = CheckpointManager(f"{root}/durable", keep_last=1)
        fast = CheckpointManager(f"{root}/fast", keep_last=1, durable=False)

        def fsynced() -> None:
            with open(f"{root}/fsynced.pt", "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())

        savers = {
            "plain torch.save": lambda step: torch.save(state, f"{root}/plain.pt"),
            "torch.save + fsync": lambda step: fsynced(),
            "trainmedic (fsync)": lambda step: durable.save(state, step=step, epoch=0),
            "trainmedic (fsync=False)": lambda step: fast.save(state, step=step, epoch=0),
        }
        for step in range(args.rounds):
            for name in names:
                started = time.perf_counter()
                savers[name](step)
                seconds[name].append(time.perf_counter() - started)
    print(f"{args.mb} MB state, median of {args.rounds}:")
    plain = statistics.median(seconds["plain torch.save"])
    for name in names:
        median = statistics.median(seconds[name])
        print(f"  {name:26s} {args.mb / median:8.1f} MB/s   {plain / median:.2f}x plain torch.save")


if __name__ == "__main__":
    main()
