"""TOR015 in Lightning: a module whose `__init__` arguments the checkpoint does not record.

`Classifier(hidden=64)` trains 3 epochs; `ModelCheckpoint` (Lightning's default) writes its
checkpoint each epoch. The module never calls `self.save_hyperparameters()`, so the checkpoint
holds the weights but not `hidden`: `Classifier.load_from_checkpoint(path)`, the way its users
load it, fails with `TypeError: Classifier.__init__() missing 1 required positional argument:
'hidden'`. Under `trainmedic run -- python examples/lightning/hparams_not_saved.py --out DIR` the save
checks rebuild the module from the checkpoint as that loader does and say so at the end of the
run. `--fixed` records the arguments (`self.save_hyperparameters()`): the checkpoint rebuilds,
its outputs equal the module's at the save.
"""

import argparse

import lightning as L
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn


class Classifier(L.LightningModule):
    def __init__(self, hidden, record=False):
        super().__init__()
        if record:
            self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(20, hidden), nn.ReLU(), nn.Linear(hidden, 4))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main(out, fixed=False, epochs=3):
    L.seed_everything(0, verbose=False)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(448, 20, generator=g)
    y = (x @ torch.randn(20, 4, generator=g)).argmax(dim=1)
    train = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    trainer = L.Trainer(
        max_epochs=epochs,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=out,
    )
    trainer.fit(Classifier(hidden=64, record=fixed), train)
    print(f"checkpoint: {trainer.checkpoint_callback.best_model_path}")
    if fixed:
        reloaded = Classifier.load_from_checkpoint(trainer.checkpoint_callback.best_model_path)
        print(f"reloaded: hidden={reloaded.hparams.hidden}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="lightning_run", help="the checkpoints' folder")
    parser.add_argument("--fixed", action="store_true")
    args = parser.parse_args()
    main(args.out, fixed=args.fixed)
