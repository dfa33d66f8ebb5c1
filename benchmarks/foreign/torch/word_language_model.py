"""Word-level LSTM language model, updated by hand (the style of PyTorch's word_language_model example).

Synthetic corpus: token sequences drawn from a fixed random Markov chain (so there is
something to learn). Truncated BPTT with hidden-state repackaging, parameters updated
with `p.data.add_(p.grad, alpha=-lr)` after gradient clipping, no torch.optim.

Bugs: `no-train-mode`: train() no longer calls model.train(), so after the first
evaluate() every epoch trains in eval mode (dropout off): TOR002. `no-zero-grad`:
`model.zero_grad()` is left out; clipping then keeps the summed gradients small, so
nothing blows up, but every update follows the sum of all past gradients: TOR003.
"""

from __future__ import annotations

import argparse
import math

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["no-train-mode", "no-zero-grad"], default=None)
parser.add_argument("--epochs", type=int, default=4)
args = parser.parse_args()
torch.manual_seed(1111)

VOCAB, BPTT, BATCH, EVAL_BATCH = 40, 8, 8, 4


def synthetic_corpus(length: int, generator: torch.Generator) -> torch.Tensor:
    """Tokens of a random sparse Markov chain: each word has a few likely successors."""
    transitions = torch.rand(VOCAB, VOCAB, generator=generator) ** 8
    transitions /= transitions.sum(dim=1, keepdim=True)
    tokens = [0]
    for _ in range(length - 1):
        tokens.append(int(torch.multinomial(transitions[tokens[-1]], 1, generator=generator)))
    return torch.tensor(tokens)


def batchify(data: torch.Tensor, bsz: int) -> torch.Tensor:
    columns = data.size(0) // bsz
    return data[: columns * bsz].view(bsz, -1).t().contiguous()


class RNNModel(nn.Module):
    def __init__(self, ntoken: int, ninp: int, nhid: int, nlayers: int, dropout: float = 0.3) -> None:
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid, self.nlayers = nhid, nlayers

    def forward(self, src: torch.Tensor, hidden: tuple[torch.Tensor, torch.Tensor]):
        emb = self.drop(self.encoder(src))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.decoder.out_features)
        return nn.functional.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz: int) -> tuple[torch.Tensor, torch.Tensor]:
        weight = next(self.parameters())
        return (
            weight.new_zeros(self.nlayers, bsz, self.nhid),
            weight.new_zeros(self.nlayers, bsz, self.nhid),
        )


def repackage_hidden(h):
    """Cut the graph between BPTT segments."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source: torch.Tensor, i: int) -> tuple[torch.Tensor, torch.Tensor]:
    seq_len = min(BPTT, len(source) - 1 - i)
    return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len].reshape(-1)


gen = torch.Generator().manual_seed(0)
train_data = batchify(synthetic_corpus(2000, gen), BATCH)
val_data = batchify(synthetic_corpus(400, gen), EVAL_BATCH)
model = RNNModel(VOCAB, 16, 32, 2)
criterion = nn.NLLLoss()
lr, clip = 5.0, 0.25


def evaluate(data_source: torch.Tensor) -> float:
    model.eval()
    total = 0.0
    hidden = model.init_hidden(EVAL_BATCH)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, BPTT):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total += len(data) * criterion(output, targets).item()
    return total / (len(data_source) - 1)


def train() -> None:
    if args.bug != "no-train-mode":
        model.train()
    hidden = model.init_hidden(BATCH)
    for i in range(0, train_data.size(0) - 1, BPTT):
        data, targets = get_batch(train_data, i)
        hidden = repackage_hidden(hidden)
        if args.bug != "no-zero-grad":
            model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)


best_val_loss = None
model.train()
for epoch in range(1, args.epochs + 1):
    train()
    val_loss = evaluate(val_data)
    print(f"| end of epoch {epoch} | valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):8.2f}")
    if best_val_loss is None or val_loss < best_val_loss:
        best_val_loss = val_loss
    else:
        lr /= 4.0
