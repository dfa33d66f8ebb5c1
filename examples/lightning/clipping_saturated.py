"""TRN010 in Lightning: `gradient_clip_val` hides a learning rate 10,000x too high.

A small Transformer encoder classifies synthetic sequences; the Trainer clips
the gradient norm to 1.0 (`gradient_clip_val=1.0`). With Adam at `lr=10`
(10,000x 1e-3) the norm before clipping sits about 60 times above the
threshold at every step, while the norm the optimizer applies is 1.0. Run
bare, or under `trainmedic run -- python examples/lightning/clipping_saturated.py`
(the Guard callback is added automatically). `--fixed` uses `lr=1e-3` with a
linear warm-up: the healthy form of this run.
"""

import sys

import lightning as L
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn


class SequenceClassifier(L.LightningModule):
    def __init__(self, lr, warmup_steps):
        super().__init__()
        self.save_hyperparameters()
        self.embed = nn.Linear(5, 16)
        layer = nn.TransformerEncoderLayer(16, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(dim=1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_epoch=True, on_step=False)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self(x), y))

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        warmup = self.hparams.warmup_steps
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: min(1.0, (step + 1) / (warmup + 1))
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def main(fixed=False, callbacks=(), epochs=3):
    L.seed_everything(0, verbose=False)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1280, 4, 5, generator=g)
    y = (x.flatten(1) @ torch.randn(20, 4, generator=g)).argmax(dim=1)
    train = DataLoader(TensorDataset(x[:1024], y[:1024]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(x[1024:], y[1024:]), batch_size=128)
    trainer = L.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        devices=1,
        gradient_clip_val=1.0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=list(callbacks),
    )
    model = (
        SequenceClassifier(lr=1e-3, warmup_steps=10) if fixed else SequenceClassifier(lr=10.0, warmup_steps=0)
    )
    trainer.fit(model, train, val)
    return trainer


if __name__ == "__main__":
    main(fixed="--fixed" in sys.argv)
