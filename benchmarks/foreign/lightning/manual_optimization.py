"""A LightningModule with manual optimization (`self.automatic_optimization = False`).

Healthy as written: `opt.zero_grad()`, `self.manual_backward(loss)`, `opt.step()` every
batch, the scheduler stepped at each epoch end. `--bug no-zero-grad` drops the
`opt.zero_grad()` call: gradients of every batch add up across steps (TOR003
grads-not-zeroed).

Synthetic data: 2,048 rows of 16 features, 3 classes separated by random centres.
"""

import argparse

import lightning as L
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["no-zero-grad"], default=None)
parser.add_argument("--epochs", type=int, default=4)
args = parser.parse_args()


class Classifier(L.LightningModule):
    def __init__(self, zero_grad: bool = True):
        super().__init__()
        self.automatic_optimization = False
        self.zero_grad_each_step = zero_grad
        self.net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 3))

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        if self.zero_grad_each_step:
            opt.zero_grad()
        self.manual_backward(loss)
        opt.step()
        self.log("train_loss", loss, prog_bar=True)

    def on_train_epoch_end(self):
        self.lr_schedulers().step()

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)
        return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)]


torch.manual_seed(0)
centres = 2 * torch.randn(3, 16)
y = torch.randint(0, 3, (2048,))
x = centres[y] + torch.randn(2048, 16)
train = DataLoader(TensorDataset(x[:1792], y[:1792]), batch_size=32, shuffle=True)
val = DataLoader(TensorDataset(x[1792:], y[1792:]), batch_size=256)
trainer = L.Trainer(
    max_epochs=args.epochs,
    accelerator="cpu",
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
trainer.fit(Classifier(zero_grad=args.bug != "no-zero-grad"), train, val)
print(f"trained {trainer.current_epoch} epochs, val_loss {float(trainer.callback_metrics['val_loss']):.3f}")
