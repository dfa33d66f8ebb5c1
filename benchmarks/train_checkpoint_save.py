"""Checkpoint save throughput: trainmedic.checkpoint (atomic, fsynced, hashed) vs plain torch.save.

The same state (a model's weights and AdamW moments, ~3x the parameters) is saved
alternately by both into the same directory, several rounds; MB/s of each and the
ratio. plain torch.save is *not* fsynced: the comparison is against what people
do. Target (issue #5): >= 0.8x of plain torch.save.

    python benchmarks/train_checkpoint_save.py --mb 200 --dir .
"""

from __future__ import annotations

import argparse
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
    plain, atomic = [], []
    with tempfile.TemporaryDirectory(dir=args.dir) as root:
        manager = CheckpointManager(root, keep_last=1)
        for step in range(args.rounds):
            started = time.perf_counter()
            torch.save(state, f"{root}/plain.pt")
            plain.append(time.perf_counter() - started)
            started = time.perf_counter()
            manager.save(state, step=step, epoch=0)
            atomic.append(time.perf_counter() - started)
    p, a = statistics.median(plain), statistics.median(atomic)
    print(f"{args.mb} MB state, median of {args.rounds}:")
    print(f"  plain torch.save                   {args.mb / p:8.1f} MB/s")
    print(f"  trainmedic (atomic, fsync, sha256) {args.mb / a:8.1f} MB/s   {p / a:.2f}x plain")


if __name__ == "__main__":
    main()
