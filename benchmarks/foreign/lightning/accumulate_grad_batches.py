"""A LightningModule with a backbone and a classification head, trained with
`Trainer(accumulate_grad_batches=4, gradient_clip_val=1.0)`: Lightning sums the gradients of
4 batches before each optimizer step and zeroes them after it.

Healthy as written (accumulation is configured, so no "gradients not zeroed" may be raised).
`--bug head-not-optimized` builds the optimizer in `configure_optimizers` from
`self.backbone.parameters()` only, as when the head was added after the optimizer code was
written: the head keeps its random weights (TOR001 frozen-parameters: trainable parameters
missing from the optimizer).

Data: scikit-learn's bundled wine table (178 rows, 13 features, 3 classes), standardised.
"""

import argparse

import lightning as L
import torch.nn.functional as F
from sklearn.datasets import load_wine
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["head-not-optimized"], default=None)
parser.add_argument("--epochs", type=int, default=8)
args = parser.parse_args()


class WineClassifier(L.LightningModule):
    def __init__(self, head_optimized: bool = True):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Linear(13, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 32), nn.ReLU()
        )
        self.head = nn.Linear(32, 3)
        self.head_optimized = head_optimized

    def forward(self, x):
        return self.head(self.backbone(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", F.cross_entropy(self(x), y))

    def configure_optimizers(self):
        params = self.parameters() if self.head_optimized else self.backbone.parameters()
        return torch.optim.AdamW(params, lr=3e-3)


L.seed_everything(0, verbose=False)
x, y = load_wine(return_X_y=True)
x = torch.tensor((x - x.mean(axis=0)) / x.std(axis=0), dtype=torch.float32)
y = torch.tensor(y)
order = torch.randperm(len(y))
train_idx, val_idx = order[:142], order[142:]
train = DataLoader(TensorDataset(x[train_idx], y[train_idx]), batch_size=8, shuffle=True)
val = DataLoader(TensorDataset(x[val_idx], y[val_idx]), batch_size=64)
trainer = L.Trainer(
    max_epochs=args.epochs,
    accumulate_grad_batches=4,
    gradient_clip_val=1.0,
    accelerator="cpu",
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
trainer.fit(WineClassifier(head_optimized=args.bug != "head-not-optimized"), train, val)
print(f"val_loss {float(trainer.callback_metrics['val_loss']):.3f}")
