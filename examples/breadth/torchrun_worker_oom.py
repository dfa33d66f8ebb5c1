"""torchrun, 2 workers: rank 1 keeps every "batch" in memory until the OOM killer ends it.

Run: trainmedic run --memory-limit 1G -- torchrun --nproc-per-node 2 examples/breadth/torchrun_worker_oom.py
torchrun itself reports only "exitcode: -9" for local rank 1; trainmedic says the OOM killer
took rank 1 (RUN001, with its pid and peak RSS). Without a limit rank 1 stops at 3 GB.
"""

import os
import time

rank = int(os.environ["RANK"])
print(f"rank {rank}: Epoch 1/1", flush=True)
cache = []
for _ in range(60):
    if rank == 1:
        cache.append(bytearray(50 << 20))  # 50 MB each, kept: the leak
    time.sleep(0.05)
time.sleep(3)
