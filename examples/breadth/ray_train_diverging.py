"""Ray Train (TorchTrainer, 2 CPU workers): the learning rate is far too high and the loss goes NaN.

Run: trainmedic run -- python examples/breadth/ray_train_diverging.py
Each worker's `ray.train.report` arrives as an Epoch event tagged with its world rank.
Set LR=0.001 for the healthy run (its loss falls 509 -> 28 in 8 epochs; 0.01 still diverges
on these inputs). NAN_RANK=1 (with LR=0.001) gives that worker a shard whose inputs hold a NaN
from its fourth epoch: only its loss becomes NaN, and TRN001 names its rank.
"""

import os

import ray
import ray.train
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer


def train_loop(config):
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    x = torch.randn(64, 4) * 10
    y = x.sum(1, keepdim=True)
    corrupt = ray.train.get_context().get_world_rank() == config["nan_rank"]
    for epoch in range(8):
        if corrupt and epoch == 3:
            x[5, 2] = float("nan")  # one bad value in this worker's shard
        loss = ((model(x) - y) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        ray.train.report({"loss": loss.item(), "epoch": epoch})


if __name__ == "__main__":
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    trainer = TorchTrainer(
        train_loop,
        train_loop_config={
            "lr": float(os.environ.get("LR", "1.0")),
            "nan_rank": int(os.environ.get("NAN_RANK", "-1")),
        },
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
        run_config=RunConfig(
            storage_path=os.path.abspath(os.environ.get("RAY_RESULTS", "ray_results")), name="demo"
        ),
    )
    trainer.fit()
    ray.shutdown()
