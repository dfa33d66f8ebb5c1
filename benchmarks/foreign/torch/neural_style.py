"""Style transfer with L-BFGS on the input image (the style of PyTorch's neural style tutorial).

A small fixed random conv feature extractor stands in for VGG (no weights can be
downloaded); content loss on one layer, Gram-matrix style losses on others; the
optimized tensor is the image itself, clamped to [0, 1] inside the closure. The random
images keep to mid-tones (0.2 to 0.8), as photographs mostly do: on uniform noise in [0, 1]
the clamp cuts in on every evaluation, invalidates L-BFGS's curvature history and the loss
jumps ~10^5 x twice in 25 steps (measured bare), a real instability no tutorial run shows.

Bug `no-zero-grad`: the closure does not call `optimizer.zero_grad()`, so every
evaluation adds to the previous gradients: TOR003.
"""

from __future__ import annotations

import argparse

import torch.nn.functional as F

import torch
from torch import nn, optim

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["no-zero-grad"], default=None)
parser.add_argument("--steps", type=int, default=25)
args = parser.parse_args()
torch.manual_seed(0)

SIZE = 24
style_img = 0.2 + 0.6 * torch.rand(1, 3, SIZE, SIZE)
content_img = 0.2 + 0.6 * torch.rand(1, 3, SIZE, SIZE)


def gram_matrix(x: torch.Tensor) -> torch.Tensor:
    a, b, c, d = x.size()
    features = x.view(a * b, c * d)
    return torch.mm(features, features.t()).div(a * b * c * d)


cnn = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
    nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
    nn.AvgPool2d(2),
    nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
).eval()  # fmt: skip
cnn.requires_grad_(False)
style_layers, content_layer = (1, 3, 6), 3


def features(x: torch.Tensor) -> dict[int, torch.Tensor]:
    out = {}
    for index, layer in enumerate(cnn):
        x = layer(x)
        out[index] = x
    return out


style_targets = {i: gram_matrix(f).detach() for i, f in features(style_img).items() if i in style_layers}
content_target = features(content_img)[content_layer].detach()

input_img = content_img.clone().requires_grad_(True)
optimizer = optim.LBFGS([input_img])
style_weight, content_weight = 1e6, 1.0

for _ in range(args.steps):

    def closure() -> torch.Tensor:
        with torch.no_grad():
            input_img.clamp_(0, 1)
        if args.bug != "no-zero-grad":
            optimizer.zero_grad()
        feats = features(input_img)
        style_score = sum(F.mse_loss(gram_matrix(feats[i]), style_targets[i]) for i in style_layers)
        content_score = F.mse_loss(feats[content_layer], content_target)
        loss = style_weight * style_score + content_weight * content_score
        loss.backward()
        return loss

    loss = optimizer.step(closure)
with torch.no_grad():
    input_img.clamp_(0, 1)
print(f"final loss {loss.item():.4f}")
