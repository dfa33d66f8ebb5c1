"""A complete small training run with trainmedic.train: synthetic digits, a small CNN.

bf16 autocast, gradient accumulation, warm-up + cosine schedule, clipping, early
stopping, `best` and `last` checkpoints, and resume: kill it at any moment and run
it again, and it continues where it stopped, to the same weights bit for bit.

    python examples/train_mnist_like.py --checkpoint-dir ckpt
    trainmedic verify-resume -- python examples/train_mnist_like.py --checkpoint-dir ckpt
"""

from __future__ import annotations

import argparse

import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn
from trainmedic.train import EarlyStopping, fit, param_groups, warmup_cosine

CLASSES = 10


def synthetic_digits(samples: int, seed: int) -> TensorDataset:
    """28x28 grey images: each class is a fixed random stroke pattern, plus noise and a shift."""
    generator = torch.Generator().manual_seed(seed)
    patterns = torch.rand(CLASSES, 1, 28, 28, generator=torch.Generator().manual_seed(1234)) > 0.8
    labels = torch.randint(0, CLASSES, (samples,), generator=generator)
    images = patterns[labels].float() + 0.5 * torch.randn(samples, 1, 28, 28, generator=generator)
    shifts = torch.randint(-2, 3, (samples,), generator=generator)
    images = torch.stack([torch.roll(img, int(s), dims=-1) for img, s in zip(images, shifts, strict=True)])
    return TensorDataset(images, labels)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(0.2), nn.Linear(16 * 7 * 7, CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return (logits.argmax(dim=1) == labels).float().mean()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--accum", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--checkpoint-dir", default="checkpoints/mnist_like")
    args = parser.parse_args()

    torch.manual_seed(0)  # the initial weights; fit seeds the rest (and restores it on resume)
    train_set = synthetic_digits(args.samples, seed=1)
    val_set = synthetic_digits(args.samples // 4, seed=2)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=256)

    model = SmallCNN()
    optimizer = torch.optim.AdamW(param_groups(model, weight_decay=0.05), lr=args.lr)
    steps_per_epoch = -(-len(train_loader) // args.accum)
    total_steps = args.epochs * steps_per_epoch
    scheduler = warmup_cosine(optimizer, warmup_steps=max(1, total_steps // 10), total_steps=total_steps)

    result = fit(
        model,
        train_loader,
        optimizer=optimizer,
        loss_fn=F.cross_entropy,
        epochs=args.epochs,
        val_loader=val_loader,
        scheduler=scheduler,
        metrics={"accuracy": accuracy},
        precision="bf16",
        grad_accum_steps=args.accum,
        max_grad_norm=1.0,
        early_stopping=EarlyStopping(monitor="val_loss", patience=3),
        checkpoint_dir=args.checkpoint_dir,
        checkpoint_every=5,
        best_metric="val_accuracy",
        best_mode="max",
        label_map={i: str(i) for i in range(CLASSES)},
    )
    if result.resumed_from:
        print(f"resumed from {result.resumed_from}")
    for epoch, metrics in enumerate(result.history):
        shown = ", ".join(f"{k}={v:.4f}" for k, v in metrics.items())
        print(f"epoch {epoch}: {shown}")
    print(f"done: {result.steps} steps, effective batch {result.effective_batch_size}")


if __name__ == "__main__":
    main()
