"""Ray Train (TorchTrainer, 2 CPU workers): worker rank 1 crashes at epoch 3.

Run: trainmedic run -- python examples/breadth/ray_train_worker_crash.py
CRASH=abort (default) ends rank 1's process with SIGABRT, as a native library does (Ray reports
"The actor died unexpectedly"); CRASH=raise raises a Python exception in rank 1 (Ray reports it
from the driver as a worker-group error). Either way trainmedic names the worker: its Ray rank,
pid and actor.
"""

import os
import time

import ray
import ray.train
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer


def train_loop(config):
    import torch

    rank = ray.train.get_context().get_world_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 4)
    y = x.sum(1, keepdim=True)
    for epoch in range(config["epochs"]):
        if rank == 1 and epoch == 3:
            if config["crash"] == "raise":
                raise ValueError(f"corrupt shard on rank {rank}: label 7 outside [0, 5)")
            os.abort()
        loss = ((model(x) - y) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        ray.train.report({"loss": loss.item(), "epoch": epoch})
        time.sleep(0.2)


if __name__ == "__main__":
    ray.init(num_cpus=2, include_dashboard=False)
    trainer = TorchTrainer(
        train_loop,
        train_loop_config={"epochs": 8, "crash": os.environ.get("CRASH", "abort")},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
        run_config=RunConfig(
            storage_path=os.path.abspath(os.environ.get("RAY_RESULTS", "ray_results")), name="worker_crash"
        ),
    )
    trainer.fit()
    ray.shutdown()
