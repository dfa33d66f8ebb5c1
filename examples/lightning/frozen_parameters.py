"""TOR001 in Lightning: configure_optimizers hands only the head to the optimizer.

Run bare, or under `trainmedic run -- python examples/lightning/frozen_parameters.py`
(the Guard callback is added automatically). `--fixed` trains every parameter: the
healthy form of this run.
"""

import sys

import lightning as L
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn


class Classifier(L.LightningModule):
    def __init__(self, train_everything):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Dropout(0.1))
        self.head = nn.Linear(64, 4)
        self.train_everything = train_everything

    def forward(self, x):
        return self.head(self.body(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_epoch=True, on_step=False)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self(x), y))

    def configure_optimizers(self):
        params = self.parameters() if self.train_everything else self.head.parameters()
        return torch.optim.SGD(params, lr=0.1)


def main(fixed=False, callbacks=(), epochs=3):
    L.seed_everything(0, verbose=False)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 20, generator=g)
    y = (x @ torch.randn(20, 4, generator=g)).argmax(dim=1)
    train = DataLoader(TensorDataset(x[:448], y[:448]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(x[448:], y[448:]), batch_size=64)
    trainer = L.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=list(callbacks),
    )
    trainer.fit(Classifier(train_everything=fixed), train, val)
    return trainer


if __name__ == "__main__":
    main(fixed="--fixed" in sys.argv)
