"""A tiny character-level GPT in the style of nanoGPT / minGPT: causal self-attention blocks,
AdamW with weight decay, linear warm-up then a cosine learning-rate schedule, gradient
clipping at 1.0, the loss printed every 10 iterations.

Healthy as written (learning rate 3e-3: the loss falls from 3.3 to about 0.4). `--bug
lr-too-high` trains at a learning rate of 1.0, as a mistyped `--learning_rate` does: the loss
falls in the first steps of the warm-up (3.3 to 2.0), blows up to 5-14 as the rate grows and
stays there for a stretch of the run, then comes back down as the cosine schedule lowers the
rate; the run ends calmly at about 2.2, never as good as the healthy one (TRN002
loss-divergence: the episode and the steps it spanned).

Synthetic text: sentences drawn from a small fixed grammar (vocabulary of about 30 characters).
"""

import argparse
import math
import random

from torch.nn import functional as F

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["lr-too-high"], default=None)
parser.add_argument("--iters", type=int, default=600)
args = parser.parse_args()

torch.set_num_threads(1)  # a tiny model: threads only contend
random.seed(0)
torch.manual_seed(0)
subjects = ["the cat", "a dog", "my friend", "the old man", "her sister", "our teacher"]
verbs = ["sees", "likes", "walks past", "waits for", "talks to", "draws"]
objects = ["the river", "a red house", "the small boat", "an open door", "the garden", "a tall tree"]
text = " ".join(
    f"{random.choice(subjects)} {random.choice(verbs)} {random.choice(objects)}." for _ in range(3000)
)
chars = sorted(set(text))
data = torch.tensor([chars.index(c) for c in text])
block, batch_size = 32, 32


def get_batch():
    ix = torch.randint(len(data) - block - 1, (batch_size,))
    x = torch.stack([data[i : i + block] for i in ix])
    y = torch.stack([data[i + 1 : i + 1 + block] for i in ix])
    return x, y


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.register_buffer("mask", torch.triu(torch.ones(block, block, dtype=torch.bool), 1))

    def forward(self, x):
        h = self.ln1(x)
        t = x.size(1)
        x = x + self.attn(h, h, h, attn_mask=self.mask[:t, :t], need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, d=64, heads=4, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(block, d)
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1)))
        logits = self.head(self.ln(self.blocks(x)))
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


model = GPT(len(chars))
learning_rate = 1.0 if args.bug == "lr-too-high" else 3e-3
warmup, min_lr = 100, learning_rate / 10
optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.1, betas=(0.9, 0.95))


def get_lr(it):
    if it < warmup:
        return learning_rate * (it + 1) / warmup
    ratio = (it - warmup) / (args.iters - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


for it in range(args.iters):
    for group in optimizer.param_groups:
        group["lr"] = get_lr(it)
    x, y = get_batch()
    loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    if it % 20 == 0:
        print(f"iter {it}: loss {loss.item():.4f}, lr {get_lr(it):.2e}")
print(f"final loss {loss.item():.4f}")
