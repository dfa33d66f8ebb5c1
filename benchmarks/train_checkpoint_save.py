"""Checkpoint save time: trainmedic.checkpoint (atomic, fsynced, checksummed) vs plain torch.save.

The same state (a model's weights and AdamW moments, ~3x the parameters) is saved by
each writer in turn into the same directory, the order rotating each round; the first
round is a warm-up (not counted: it maps the memory the later rounds reuse). Figures
are medians, as "x plain torch.save" = torch.save's time / the writer's time (>= 1 is
faster). plain torch.save is *not* fsynced: that is what people do; `torch.save +
fsync` is the durable baseline.

Two figures for trainmedic's background save (`save_async`, what `fit` does):
- blocked: how long the training thread waits (the copy of the state into reused CPU
  buffers); training goes on while the rest happens;
- durable: from the call until the checkpoint is written, fsynced and renamed into
  place (save_async + wait()), with nothing else running.
Target (issue #5): >= 0.8x plain torch.save while atomic and fsynced.

    python benchmarks/train_checkpoint_save.py --mb 200 --rounds 5 --dirs /dev/shm,/tmp
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable

import torch
from trainmedic.checkpoint import CheckpointManager


def filesystem(path: str) -> str:
    out = subprocess.run(["df", "--output=fstype", path], capture_output=True, text=True, check=False)
    lines = out.stdout.split()
    return lines[-1] if len(lines) > 1 else "?"


def measure(directory: str, state: dict[str, object], rounds: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(dir=directory, prefix="trainmedic-bench-") as root:
        durable = CheckpointManager(f"{root}/sync", keep_last=1)
        fast = CheckpointManager(f"{root}/nofsync", keep_last=1, durable=False)
        background = CheckpointManager(f"{root}/async", keep_last=1)

        def fsynced() -> None:
            with open(f"{root}/fsynced.pt", "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())

        def in_background(step: int, times: dict[str, list[float]]) -> None:
            started = time.perf_counter()
            background.save_async(state, step=step, epoch=0)
            blocked = time.perf_counter() - started
            background.wait()
            times["trainmedic async: blocked"].append(blocked)
            times["trainmedic async: durable"].append(time.perf_counter() - started)

        savers: dict[str, Callable[[int], None]] = {
            "plain torch.save": lambda step: torch.save(state, f"{root}/plain.pt"),
            "torch.save + fsync": lambda step: fsynced(),
            "trainmedic sync, fsync": lambda step: durable.save(state, step=step, epoch=0),
            "trainmedic sync, no fsync": lambda step: fast.save(state, step=step, epoch=0),
        }
        times: dict[str, list[float]] = {
            name: [] for name in [*savers, "trainmedic async: blocked", "trainmedic async: durable"]
        }
        order = [*savers, "async"]
        for round_ in range(rounds + 1):
            warm_up = round_ == 0
            for name in order[round_ % len(order) :] + order[: round_ % len(order)]:
                if name == "async":
                    in_background(round_, {k: [] for k in times} if warm_up else times)
                    continue
                started = time.perf_counter()
                savers[name](round_)
                if not warm_up:
                    times[name].append(time.perf_counter() - started)
        return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200, help="size of the state in MB")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dirs", default="/dev/shm,.", help="comma-separated directories to write in")
    args = parser.parse_args()
    torch.set_num_threads(1)
    floats = args.mb * 2**20 // 4 // 3
    state: dict[str, object] = {
        "model": {"w": torch.randn(floats)},
        "optimizer": {"exp_avg": torch.randn(floats), "exp_avg_sq": torch.rand(floats)},
        "step": 1,
    }
    for directory in args.dirs.split(","):
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        times = measure(directory, state, args.rounds)
        where = f"{directory} ({filesystem(directory)})"
        print(f"{args.mb} MB state in {where}, median of {args.rounds}, load at start {load}:")
        plain = statistics.median(times["plain torch.save"])
        fsynced = statistics.median(times["torch.save + fsync"])
        for name, seconds in times.items():
            median = statistics.median(seconds)
            print(
                f"  {name:28s} {median * 1e3:8.0f} ms  {plain / median:5.2f}x plain torch.save"
                f"  {fsynced / median:5.2f}x torch.save + fsync"
            )


if __name__ == "__main__":
    main()
