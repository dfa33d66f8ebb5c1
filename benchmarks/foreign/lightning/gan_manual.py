"""A GAN as a LightningModule with manual optimization, in the style of Lightning's docs.

Two networks and two optimizers returned by `configure_optimizers`; `training_step` takes
both from `self.optimizers()`, updates the discriminator on real and detached fake samples,
then the generator through the discriminator, each inside `toggle_optimizer` /
`untoggle_optimizer`, with `zero_grad()`, `self.manual_backward(loss)` and `step()`.

Healthy as written. `--bug no-d-zero-grad` drops `d_opt.zero_grad()` (moved, in a refactor,
to the generator's half only): the discriminator's gradients add up over every step
(TOR003 grads-not-zeroed).

Synthetic data: 4,096 points on a ring of 8 Gaussians in the plane.
"""

import argparse
import math

import lightning as L
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["no-d-zero-grad"], default=None)
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()

LATENT = 8


class GAN(L.LightningModule):
    def __init__(self, latent_dim: int = LATENT, lr: float = 2e-4, zero_d_grad: bool = True):
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.generator = nn.Sequential(
            nn.Linear(latent_dim, 64),
            nn.LeakyReLU(0.2),
            nn.Linear(64, 64),
            nn.LeakyReLU(0.2),
            nn.Linear(64, 2),
        )
        self.discriminator = nn.Sequential(
            nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1)
        )

    def forward(self, z):
        return self.generator(z)

    def adversarial_loss(self, logits, target_is_real: bool):
        target = torch.ones_like(logits) if target_is_real else torch.zeros_like(logits)
        return nn.functional.binary_cross_entropy_with_logits(logits, target)

    def training_step(self, batch, batch_idx):
        (real,) = batch
        g_opt, d_opt = self.optimizers()
        z = torch.randn(real.shape[0], self.hparams.latent_dim, device=self.device)
        fake = self(z)

        # discriminator: real samples as real, generated ones (detached) as fake
        self.toggle_optimizer(d_opt)
        d_loss = 0.5 * (
            self.adversarial_loss(self.discriminator(real), True)
            + self.adversarial_loss(self.discriminator(fake.detach()), False)
        )
        if self.hparams.zero_d_grad:
            d_opt.zero_grad()
        self.manual_backward(d_loss)
        d_opt.step()
        self.untoggle_optimizer(d_opt)

        # generator: make the discriminator call its samples real
        self.toggle_optimizer(g_opt)
        g_loss = self.adversarial_loss(self.discriminator(fake), True)
        g_opt.zero_grad()
        self.manual_backward(g_loss)
        g_opt.step()
        self.untoggle_optimizer(g_opt)

        self.log_dict({"d_loss": d_loss, "g_loss": g_loss}, prog_bar=True)

    def configure_optimizers(self):
        lr = self.hparams.lr
        g_opt = torch.optim.Adam(self.generator.parameters(), lr=lr, betas=(0.5, 0.999))
        d_opt = torch.optim.Adam(self.discriminator.parameters(), lr=lr, betas=(0.5, 0.999))
        return [g_opt, d_opt]


torch.manual_seed(0)
angles = 2 * math.pi * torch.randint(0, 8, (4096,)) / 8
ring = torch.stack([torch.cos(angles), torch.sin(angles)], dim=1) * 2 + 0.05 * torch.randn(4096, 2)
loader = DataLoader(TensorDataset(ring), batch_size=128, shuffle=True)
trainer = L.Trainer(
    max_epochs=args.epochs,
    accelerator="cpu",
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
model = GAN(zero_d_grad=args.bug != "no-d-zero-grad")
trainer.fit(model, loader)
with torch.no_grad():
    radius = model(torch.randn(1024, LATENT)).norm(dim=1).mean()
print(f"trained {trainer.current_epoch} epochs, mean radius of samples {float(radius):.2f} (data: 2.00)")
