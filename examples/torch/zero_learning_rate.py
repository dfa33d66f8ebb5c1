"""TRN012: a linear schedule with warm-up sized for one epoch in a four-epoch run.

The loop builds the Hugging Face style schedule (linear warm-up, then a linear decay
to 0 at `num_training_steps`) with `num_training_steps=len(loader)`: the steps of one
epoch, not of the run. From the end of the first epoch on, the learning rate is 0:
three epochs run, log a loss and train nothing. `--fixed` sizes the schedule to the
run (`epochs * len(loader)`): it reaches 0 at the very last step, as it should.
"""

from common import FIXED, MLP, make_data, make_loader

import torch
from torch import nn


def linear_schedule_with_warmup(optimizer, warmup_steps, num_training_steps):
    """As transformers.get_linear_schedule_with_warmup."""

    def factor(step):
        if step < warmup_steps:
            return step / max(1, warmup_steps)
        return max(0.0, (num_training_steps - step) / max(1, num_training_steps - warmup_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def main(fixed=FIXED, epochs=4):
    torch.manual_seed(0)
    x, y = make_data(n=1024)
    loader = make_loader(x, y, batch_size=16)
    model = MLP()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    total = epochs * len(loader) if fixed else len(loader)
    scheduler = linear_schedule_with_warmup(optimizer, warmup_steps=10, num_training_steps=total)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            scheduler.step()
        print(f"epoch {epoch}: loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.2e}")


if __name__ == "__main__":
    main()
