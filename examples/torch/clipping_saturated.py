"""TRN010: a word-language-model loop with a learning rate 10,000x too high, hidden by clipping.

A small Transformer language model in the style of PyTorch's
word_language_model example (batchified text, `bptt`-long chunks, a causal
mask, `clip_grad_norm_` before every update) learns a synthetic corpus drawn
from a fixed Markov chain. With `lr=1000` (10,000x 0.1) the gradient norm the
optimizer applies is exactly the clipping threshold, 0.8, at every step, while
the norm before clipping sits about a thousand times above it. `--fixed` uses
`lr=0.1` with a linear warm-up: clipping engages in the first ~25 steps,
then on a few steps only.
"""

import math

from common import FIXED

import torch
from torch import nn

VOCAB, BPTT, BATCH, CLIP = 48, 20, 16, 0.8


def corpus(tokens=16_000, seed=0):
    """Text from a random sparse Markov chain over VOCAB words (no download)."""
    g = torch.Generator().manual_seed(seed)
    successors = torch.randint(0, VOCAB, (VOCAB, 3), generator=g)
    choices = torch.randint(0, 3, (tokens,), generator=g).tolist()
    words = [0]
    for choice in choices[1:]:
        words.append(int(successors[words[-1], choice]))
    return torch.tensor(words)


def batchify(data, batch_size):
    """Columns of contiguous text, as word_language_model's batchify."""
    n = data.size(0) // batch_size
    return data[: n * batch_size].view(batch_size, -1).t().contiguous()


def get_batch(source, i):
    length = min(BPTT, len(source) - 1 - i)
    return source[i : i + length], source[i + 1 : i + 1 + length].reshape(-1)


class TransformerModel(nn.Module):
    """Embedding, positional encoding, a causal TransformerEncoder and a linear decoder."""

    def __init__(self, ntoken=VOCAB, ninp=32, nhead=2, nhid=64, nlayers=2):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        position = torch.arange(BPTT).unsqueeze(1)
        div = torch.exp(torch.arange(0, ninp, 2) * (-math.log(10000.0) / ninp))
        pe = torch.zeros(BPTT, 1, ninp)
        pe[:, 0, 0::2], pe[:, 0, 1::2] = torch.sin(position * div), torch.cos(position * div)
        self.register_buffer("pe", pe)
        layer = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout=0.1)
        self.transformer = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.decoder = nn.Linear(ninp, ntoken)
        self.ninp = ninp

    def forward(self, src):
        mask = nn.Transformer.generate_square_subsequent_mask(len(src))
        x = self.encoder(src) * math.sqrt(self.ninp) + self.pe[: len(src)]
        return self.decoder(self.transformer(x, mask, is_causal=True)).view(-1, VOCAB)


def main(fixed=FIXED, epochs=3):
    torch.manual_seed(0)
    train_data = batchify(corpus(), BATCH)
    model = TransformerModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 if fixed else 1000.0)
    warmup = 20 if fixed else 0  # steps of linear warm-up
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / (warmup + 1)))
    criterion = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        total, batches = 0.0, 0
        for i in range(0, train_data.size(0) - 1, BPTT):
            data, targets = get_batch(train_data, i)
            optimizer.zero_grad()
            loss = criterion(model(data), targets)
            loss.backward()
            # clip_grad_norm_ helps prevent the exploding gradient problem in RNNs / Transformers
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            optimizer.step()
            scheduler.step()
            total, batches = total + loss.item(), batches + 1
        print(f"epoch {epoch} steps {batches} mean loss {total / batches:.3f}")


if __name__ == "__main__":
    main()
