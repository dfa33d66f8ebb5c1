"""Run under `torchrun --nproc-per-node 2` (gloo): DDP, then FSDP2, each stopped mid-run and resumed.

Writes rank 0's final weights of each to OUT/{ddp,fsdp}.pt for the test to compare with
a single process trained on the same global batches.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import DataLoader

import torch
from tests.train.distributed_common import EPOCHS, PER_RANK_BATCH, dataset, model
from trainmedic.train import fit

out = Path(sys.argv[1])
torch.set_num_threads(1)


def train(strategy: str, **kwargs: object) -> torch.nn.Module:
    net = model()
    loader = DataLoader(dataset(), batch_size=PER_RANK_BATCH, shuffle=True)
    optimizer = (
        torch.optim.SGD(net.parameters(), lr=0.1)
        if strategy == "ddp"
        else (lambda params: torch.optim.SGD(params, lr=0.1))
    )
    fit(
        net,
        loader,
        optimizer=optimizer,  # type: ignore[arg-type]
        loss_fn=F.cross_entropy,
        grad_accum_steps=2,
        strategy=strategy,
        checkpoint_dir=str(out / strategy),
        val_loader=DataLoader(dataset(), batch_size=10),
        **kwargs,  # type: ignore[arg-type]
    )
    return net


for strategy in ("ddp", "fsdp"):
    train(strategy, max_steps=3)  # stops mid-epoch 1 (2 steps an epoch) and checkpoints
    net = train(strategy, epochs=EPOCHS)  # a fresh model and optimizer: resumes from step 3
    if strategy == "fsdp":
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        state = get_model_state_dict(net, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    else:
        state = net.state_dict()
    if dist.get_rank() == 0:
        torch.save({k: v.detach().clone() for k, v in state.items()}, out / f"{strategy}.pt")
dist.destroy_process_group()
