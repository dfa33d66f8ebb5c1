"""A small DCGAN on synthetic 16x16 images (the style of PyTorch's dcgan example).

Two networks with batch norm, two Adam optimizers, the example's loop: update D on
real then detached fake batches, then update G through D with real labels.

Bug `no-generator-zero-grad`: `netG.zero_grad()` is left out, so the generator's
gradients pile up across iterations: TOR003.
"""

from __future__ import annotations

import argparse

from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn, optim

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["no-generator-zero-grad"], default=None)
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()
torch.manual_seed(999)

NZ, NGF, NDF, NC = 8, 8, 8, 1


def blobs(n: int) -> torch.Tensor:
    """Images of one bright Gaussian blob at a random place, scaled to [-1, 1] like the example's data."""
    grid = torch.arange(16.0)
    cy, cx = torch.randint(4, 12, (2, n)).float()
    img = torch.exp(
        -((grid[None, :, None] - cy[:, None, None]) ** 2 + (grid[None, None, :] - cx[:, None, None]) ** 2) / 8
    )
    return (img * 2 - 1).unsqueeze(1)


def weights_init(m: nn.Module) -> None:
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


netG = nn.Sequential(
    nn.ConvTranspose2d(NZ, NGF * 2, 4, 1, 0, bias=False),
    nn.BatchNorm2d(NGF * 2),
    nn.ReLU(True),
    nn.ConvTranspose2d(NGF * 2, NGF, 4, 2, 1, bias=False),
    nn.BatchNorm2d(NGF),
    nn.ReLU(True),
    nn.ConvTranspose2d(NGF, NC, 4, 2, 1, bias=False),
    nn.Tanh(),
)
netD = nn.Sequential(
    nn.Conv2d(NC, NDF, 4, 2, 1, bias=False),
    nn.LeakyReLU(0.2, inplace=True),
    nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False),
    nn.BatchNorm2d(NDF * 2),
    nn.LeakyReLU(0.2, inplace=True),
    nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False),
    nn.Sigmoid(),
)
netG.apply(weights_init)
netD.apply(weights_init)

criterion = nn.BCELoss()
real_label, fake_label = 1.0, 0.0
optimizerD = optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
dataloader = DataLoader(TensorDataset(blobs(512)), batch_size=32, shuffle=True)

for epoch in range(args.epochs):
    for (real,) in dataloader:
        # (1) Update D: maximize log(D(x)) + log(1 - D(G(z)))
        netD.zero_grad()
        b_size = real.size(0)
        label = torch.full((b_size,), real_label)
        errD_real = criterion(netD(real).view(-1), label)
        errD_real.backward()
        noise = torch.randn(b_size, NZ, 1, 1)
        fake = netG(noise)
        label.fill_(fake_label)
        errD_fake = criterion(netD(fake.detach()).view(-1), label)
        errD_fake.backward()
        optimizerD.step()
        # (2) Update G: maximize log(D(G(z)))
        if args.bug != "no-generator-zero-grad":
            netG.zero_grad()
        label.fill_(real_label)
        errG = criterion(netD(fake).view(-1), label)
        errG.backward()
        optimizerG.step()
    print(f"[{epoch}/{args.epochs}] Loss_D: {(errD_real + errD_fake).item():.4f} Loss_G: {errG.item():.4f}")
