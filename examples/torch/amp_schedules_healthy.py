"""Healthy mixed precision and learning-rate schedules: none of them is TRN011-TRN013.

`python amp_schedules_healthy.py VARIANT`, one of:

- `amp-early-skips`: fp16 autocast with a GradScaler started at 2**24: its first ~10 steps
  overflow and are skipped while the scale settles, then none is.
- `warmup-cosine`: linear warm-up, then a cosine decay that reaches 0 at the last step.
- `warmup-linear`: the Hugging Face linear schedule: warm-up, then linear decay to exactly 0.
- `onecycle`: OneCycleLR over the run's steps (its final lr is 1/25,000 of its peak).
- `plateau`: ReduceLROnPlateau(patience=0) on a validation loss that stops improving: the
  learning rate is cut tenfold at nearly every epoch, down to ~1e-8.
- `steplr`: StepLR cutting the rate tenfold twice (ResNet's 30/60/90-epoch recipe, shortened).
- `bf16-autocast`: fp32 weights, bf16 autocast (mixed precision).
"""

import math
import sys

from common import MLP, make_data, make_loader

import torch
from torch import nn

EPOCHS = 9


def schedule(variant, optimizer, total):
    warmup = max(1, total // 10)
    if variant == "warmup-cosine":
        return torch.optim.lr_scheduler.LambdaLR(
            optimizer,
            lambda s: (
                s / warmup if s < warmup else 0.5 * (1 + math.cos(math.pi * (s - warmup) / (total - warmup)))
            ),
        )
    if variant == "warmup-linear":
        return torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: s / warmup if s < warmup else max(0.0, (total - s) / (total - warmup))
        )
    if variant == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2, total_steps=total)
    return None


def main(variant):
    torch.manual_seed(0)
    x, y = make_data(n=1024)
    loader = make_loader(x[:768], y[:768], batch_size=16)
    model = MLP()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    total = EPOCHS * len(loader)
    per_step = schedule(variant, optimizer, total)
    per_epoch = None
    if variant == "plateau":
        per_epoch = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=0, threshold=0.5)
    elif variant == "steplr":
        per_epoch = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.1)
    amp = variant == "amp-early-skips"
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**24, enabled=amp)
    dtype = torch.float16 if amp else torch.bfloat16
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(EPOCHS):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=dtype, enabled=amp or variant == "bf16-autocast"):
                loss = loss_fn(model(xb), yb)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            if per_step is not None:
                per_step.step()
        model.eval()
        with torch.no_grad():
            val = loss_fn(model(x[768:]), y[768:]).item()
        if isinstance(per_epoch, torch.optim.lr_scheduler.ReduceLROnPlateau):
            per_epoch.step(val)
        elif per_epoch is not None:
            per_epoch.step()
        lr = optimizer.param_groups[0]["lr"]
        print(f"epoch {epoch}: loss {loss.item():.4f} val {val:.4f} lr {lr:.2e} scale {scaler.get_scale():g}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "warmup-cosine")
