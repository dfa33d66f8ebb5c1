"""TOR017: a resume that loads the model's weights from the checkpoint and nothing else.

The first part trains with Adam under a warm-up-then-decay schedule and saves a general
checkpoint as PyTorch's "saving and loading a general checkpoint" recipe does
(https://pytorch.org/tutorials/recipes/recipes/saving_and_loading_a_general_checkpoint.html):
`{"epoch", "model_state_dict", "optimizer_state_dict", "scheduler_state_dict", "loss"}`.
The second part, as a restarted job does, builds the model, optimizer and scheduler again and
loads the checkpoint, but only into the model: Adam's moments are empty, the schedule starts its
warm-up again and the step counter is back at 0. --fixed loads the optimizer's and the
scheduler's states too and goes on from the saved epoch.
"""

import tempfile
from pathlib import Path

from common import FIXED, MLP, make_data, make_loader

import torch
from torch import nn

EPOCHS, STOP_AT = 6, 3
WARMUP = 16  # steps (the loader gives 16 batches an epoch)


def build():
    model = MLP()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    # A linear warm-up over WARMUP steps, then a linear decay to 10% at the last step.
    total = EPOCHS * 16

    def factor(step):
        return (step + 1) / WARMUP if step < WARMUP else max(0.1, 1 - (step - WARMUP) / total)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    return model, optimizer, scheduler


def train(model, optimizer, scheduler, x, y, epochs):
    loss_fn = nn.CrossEntropyLoss()
    for epoch in epochs:
        model.train()
        for xb, yb in make_loader(x, y, seed=epoch):
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            scheduler.step()
        print(f"epoch {epoch} loss {loss.item():.3f} lr {scheduler.get_last_lr()[0]:.2e}")
    return epoch, loss.item()


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


if __name__ == "__main__":
    main()
