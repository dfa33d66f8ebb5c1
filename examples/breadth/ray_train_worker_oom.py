"""Ray Train (TorchTrainer, 2 CPU workers): worker rank 1 keeps every batch in memory and is OOM-killed.

Run under a memory limit, so the kernel's OOM killer (not the machine) ends it:
    trainmedic run --memory-limit 3G -- python examples/breadth/ray_train_worker_oom.py
Ray reports only "The actor died unexpectedly ... (1) The process is killed by SIGKILL by OOM
killer" from the driver; trainmedic names the worker: RUN001 with its Ray rank, pid and actor.
Without a limit, rank 1 stops growing at CACHE_LIMIT_MB (default 6000) and the run ends normally.
CACHE_STEP_MB (default 100) is how much rank 1 keeps per epoch: larger steps reach a memory
threshold in fewer epochs.
"""

import os
import time

import ray
import ray.train
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer


def train_loop(config):
    import numpy as np

    import torch

    rank = ray.train.get_context().get_world_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 4)
    y = x.sum(1, keepdim=True)
    cache = []  # rank 1's bug: every "batch" is kept, CACHE_STEP_MB at a time
    step_mb = config["cache_step_mb"]
    for epoch in range(config["epochs"]):
        loss = ((model(x) - y) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 1 and len(cache) * step_mb < config["cache_limit_mb"]:
            cache.append(np.ones(step_mb * 2**20 // 8))  # written, so resident
        ray.train.report({"loss": loss.item(), "epoch": epoch})
        time.sleep(0.2)


if __name__ == "__main__":
    ray.init(num_cpus=2, include_dashboard=False)
    trainer = TorchTrainer(
        train_loop,
        train_loop_config={
            "epochs": 80,
            "cache_limit_mb": int(os.environ.get("CACHE_LIMIT_MB", "6000")),
            "cache_step_mb": int(os.environ.get("CACHE_STEP_MB", "100")),
        },
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
        run_config=RunConfig(
            storage_path=os.path.abspath(os.environ.get("RAY_RESULTS", "ray_results")), name="worker_oom"
        ),
    )
    trainer.fit()
    ray.shutdown()
