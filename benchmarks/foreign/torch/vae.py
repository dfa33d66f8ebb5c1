"""A variational autoencoder in the style of the PyTorch VAE example: encoder to mean and
log-variance, the reparameterization trick, a sigmoid decoder, and the loss as binary
cross-entropy (summed) plus the KL divergence, Adam, a test pass per epoch.

Healthy as written. `--bug zero-grad-per-epoch` calls `optimizer.zero_grad()` once per epoch
instead of once per batch (the line sits one indentation level too far out): the gradients
of every batch add up until the epoch ends (TOR003 grads-not-zeroed).

Data: scikit-learn's bundled 8x8 digits, pixels scaled to [0, 1].
"""

import argparse

import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["zero-grad-per-epoch"], default=None)
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()
torch.manual_seed(1)


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc21 = nn.Linear(128, 8)
        self.fc22 = nn.Linear(128, 8)
        self.fc3 = nn.Linear(8, 128)
        self.fc4 = nn.Linear(128, 64)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        return mu + torch.randn_like(std) * std

    def decode(self, z):
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x):
        mu, logvar = self.encode(x)
        return self.decode(self.reparameterize(mu, logvar)), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x, reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


pixels = torch.tensor(load_digits().data, dtype=torch.float32) / 16.0
train_loader = DataLoader(TensorDataset(pixels[:1500]), batch_size=32, shuffle=True)
test_loader = DataLoader(TensorDataset(pixels[1500:]), batch_size=128)
model = VAE()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

for epoch in range(1, args.epochs + 1):
    model.train()
    train_loss = 0.0
    if args.bug == "zero-grad-per-epoch":
        optimizer.zero_grad()
    for (data,) in train_loader:
        if args.bug != "zero-grad-per-epoch":
            optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        test_loss = 0.0
        for (data,) in test_loader:
            recon_batch, mu, logvar = model(data)
            test_loss += loss_function(recon_batch, data, mu, logvar).item()
    print(
        f"====> Epoch: {epoch} Average loss: {train_loss / 1500:.4f}"
        f"  Test set loss: {test_loss / (len(pixels) - 1500):.4f}"
    )
