"""TOR015: a DDP model's state_dict() loaded into the plain model with strict=False; nothing loads.

Pre-training runs under DistributedDataParallel (gloo, one process) and saves
`ddp_model.state_dict()`: every key starts with `module.`. Fine-tuning builds the plain
model and loads the file with `strict=False`: not one key matches, PyTorch returns the
missing and unexpected keys and raises nothing, and fine-tuning starts from random weights
(the loss before it is the loss at chance). --fixed saves `ddp_model.module.state_dict()`
and loads with `strict=True`.
"""

import tempfile
from pathlib import Path

import torch.distributed as dist
from common import FIXED, MLP, make_data, make_loader, train_epoch
from torch.nn.parallel import DistributedDataParallel

import torch
from torch import nn


def pretrain(x, y, path, fixed):
    """Two epochs under DDP (one gloo process), then save the weights."""
    dist.init_process_group("gloo", init_method=f"file://{path.parent / 'store'}", rank=0, world_size=1)
    try:
        model = DistributedDataParallel(MLP())
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            loss = train_epoch(model, make_loader(x, y, seed=epoch), optimizer)
            print(f"pre-train epoch {epoch} loss {loss:.3f}")
        torch.save(model.module.state_dict() if fixed else model.state_dict(), path)
    finally:
        dist.destroy_process_group()


def main(fixed=FIXED):
    torch.manual_seed(0)
    x, y = make_data()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "pretrained.pt"
        pretrain(x, y, path, fixed)
        model = MLP()
        model.load_state_dict(torch.load(path), strict=fixed)
    with torch.no_grad():
        print(f"loss after loading {nn.functional.cross_entropy(model(x), y).item():.3f}")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    print(f"fine-tune loss {train_epoch(model, make_loader(x, y, seed=9), optimizer):.3f}")


if __name__ == "__main__":
    main()
