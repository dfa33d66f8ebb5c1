"""TOR017: a resume that loads the model's weights from the checkpoint and nothing else.

The first part trains with Adam under a warm-up-then-decay schedule and saves a general
checkpoint as PyTorch's "saving and loading a general checkpoint" recipe does
(https://pytorch.org/tutorials/recipes/recipes/saving_and_loading_a_general_checkpoint.html):
`{"epoch", "model_state_dict", "optimizer_state_dict", "scheduler_state_dict", "loss"}`.
The second part, as a restarted job does, builds the model, optimizer and scheduler again and
loads the checkpoint, but only into the model: Adam's moments are empty, the schedule starts its
warm-up again and the step counter is back at 0. --fixed loads the optimizer's and the
scheduler's states too and goes on from the saved epoch.

--mid-epoch: the checkpoint is saved within an epoch (after 40 steps: 8 batches into the third
epoch of 16) and holds the random generators' states too (torch's, NumPy's, Python's, as
`rng_state`). The restarted job loads the model, the optimizer and the scheduler, but neither
restores the generators (dropout draws other masks) nor skips the 8 batches of the interrupted
epoch already trained: it trains that epoch from its first batch again. With --fixed it restores
the three generators and trains the interrupted epoch from its 9th batch.
"""

import itertools
import random
import sys
import tempfile
from pathlib import Path

import numpy as np
from common import FIXED, MLP, make_data, make_loader

import torch
from torch import nn

EPOCHS, STOP_AT = 6, 3
WARMUP = 16  # steps (the loader gives 16 batches an epoch)
MID_EPOCH = "--mid-epoch" in sys.argv
SAVE_AT = 40  # steps, in --mid-epoch: 2 epochs of 16 batches and 8 of the third


def build():
    model = MLP()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    # A linear warm-up over WARMUP steps, then a linear decay to 10% at the last step.
    total = EPOCHS * 16

    def factor(step):
        return (step + 1) / WARMUP if step < WARMUP else max(0.1, 1 - (step - WARMUP) / total)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    return model, optimizer, scheduler


def train(model, optimizer, scheduler, x, y, epochs, skip=0, stop_at=None):
    """Train `epochs`, the first from its `skip`-th batch, until `stop_at` steps (None: all)."""
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    for epoch in epochs:
        model.train()
        batches = make_loader(x, y, seed=epoch)  # the same order for an epoch, run after run
        for xb, yb in itertools.islice(batches, skip, None):
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            scheduler.step()
            step += 1
            if step == stop_at:
                return epoch, loss.item()
        skip = 0
        print(f"epoch {epoch} loss {loss.item():.3f} lr {scheduler.get_last_lr()[0]:.2e}")
    return epoch, loss.item()


def generators():
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def restore_generators(states):
    torch.set_rng_state(states["torch"])
    np.random.set_state(states["numpy"])
    random.setstate(states["python"])


def main(fixed=FIXED):
    torch.manual_seed(0)
    x, y = make_data()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "checkpoint.pt"
        model, optimizer, scheduler = build()
        epoch, loss = train(model, optimizer, scheduler, x, y, range(STOP_AT))
        torch.save(
            {
                "epoch": epoch,
                "model_state_dict": model.state_dict(),
                "optimizer_state_dict": optimizer.state_dict(),
                "scheduler_state_dict": scheduler.state_dict(),
                "loss": loss,
            },
            path,
        )
        print("saved; the job restarts")

        model, optimizer, scheduler = build()
        checkpoint = torch.load(path)
        model.load_state_dict(checkpoint["model_state_dict"])
        if fixed:
            optimizer.load_state_dict(checkpoint["optimizer_state_dict"])
            scheduler.load_state_dict(checkpoint["scheduler_state_dict"])
        train(model, optimizer, scheduler, x, y, range(checkpoint["epoch"] + 1, EPOCHS))


def main_mid_epoch(fixed=FIXED):
    torch.manual_seed(0)
    x, y = make_data()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "checkpoint.pt"
        model, optimizer, scheduler = build()
        epoch, loss = train(model, optimizer, scheduler, x, y, range(EPOCHS), stop_at=SAVE_AT)
        torch.save(
            {
                "epoch": epoch,
                "step": SAVE_AT,
                "model_state_dict": model.state_dict(),
                "optimizer_state_dict": optimizer.state_dict(),
                "scheduler_state_dict": scheduler.state_dict(),
                "rng_state": generators(),
                "loss": loss,
            },
            path,
        )
        print(f"saved at step {SAVE_AT}, within epoch {epoch}; the job restarts")

        torch.manual_seed(1)  # the new job's own seed
        model, optimizer, scheduler = build()
        checkpoint = torch.load(path, weights_only=False)  # NumPy's state is not a tensor
        model.load_state_dict(checkpoint["model_state_dict"])
        optimizer.load_state_dict(checkpoint["optimizer_state_dict"])
        scheduler.load_state_dict(checkpoint["scheduler_state_dict"])
        skip = 0
        if fixed:
            restore_generators(checkpoint["rng_state"])
            skip = checkpoint["step"] % 16  # the batches of the interrupted epoch already trained
        train(model, optimizer, scheduler, x, y, range(checkpoint["epoch"], EPOCHS), skip=skip)


if __name__ == "__main__":
    main_mid_epoch() if MID_EPOCH else main()
