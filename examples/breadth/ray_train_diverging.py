"""Ray Train (TorchTrainer, 2 CPU workers): the learning rate is far too high and the loss goes NaN.

Run: trainmedic run -- python examples/breadth/ray_train_diverging.py
Each worker's `ray.train.report` arrives as an Epoch event tagged with its world rank.
Set LR=0.01 for the healthy run.
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
    for epoch in range(8):
        loss = ((model(x) - y) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        ray.train.report({"loss": loss.item(), "epoch": epoch})


if __name__ == "__main__":
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    trainer = TorchTrainer(
        train_loop,
        train_loop_config={"lr": float(os.environ.get("LR", "1.0"))},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
        run_config=RunConfig(
            storage_path=os.path.abspath(os.environ.get("RAY_RESULTS", "ray_results")), name="demo"
        ),
    )
    trainer.fit()
    ray.shutdown()
