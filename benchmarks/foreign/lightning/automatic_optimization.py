"""A LightningModule with automatic optimization, in the style of Lightning's MNIST examples:
`training_step` returns the loss and Lightning runs `zero_grad`, `backward` and `step`;
validation every epoch; Adam with a cosine schedule from `configure_optimizers`.

Healthy as written. `--bug softmax-output` ends the network with `nn.Softmax(dim=1)` "to get
probabilities" while the loss is still `F.cross_entropy`, which applies its own log-softmax:
probabilities are fed to cross-entropy (TOR004 softmax-into-crossentropy).

Data: scikit-learn's bundled 8x8 handwritten digits, flattened to 64 features.
"""

import argparse

import lightning as L
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["softmax-output"], default=None)
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()


class LitDigits(L.LightningModule):
    def __init__(self, lr: float = 2e-3, softmax_output: bool = False):
        super().__init__()
        self.save_hyperparameters()
        layers = [nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10)]
        if softmax_output:
            layers.append(nn.Softmax(dim=1))
        self.model = nn.Sequential(*layers)

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(dim=1) == y).float().mean())

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        return [optimizer], [
            torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=self.trainer.max_epochs)
        ]


L.seed_everything(0, verbose=False)
digits = load_digits()
x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
y = torch.tensor(digits.target)
train = DataLoader(TensorDataset(x[:1500], y[:1500]), batch_size=32, shuffle=True)
val = DataLoader(TensorDataset(x[1500:], y[1500:]), batch_size=256)
trainer = L.Trainer(
    max_epochs=args.epochs,
    accelerator="cpu",
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
trainer.fit(LitDigits(softmax_output=args.bug == "softmax-output"), train, val)
print(f"val_acc {float(trainer.callback_metrics['val_acc']):.3f}")
