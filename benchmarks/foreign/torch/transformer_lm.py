"""A small Transformer language model in the style of the PyTorch word_language_model example's
`--model Transformer` (and the nn.Transformer tutorial): token embedding plus positional
encoding, `nn.TransformerEncoder` with a causal mask, dropout, AdamW with a linear warm-up
stepped per batch through `LambdaLR`, and an evaluation after each epoch.

Healthy as written. `--bug no-train-mode` puts `model.train()` before the epoch loop instead of
at the top of each epoch: `evaluate()` switches to eval mode and every epoch after the first
trains with dropout off (TOR002 eval-mode-training).

Synthetic corpus: a token stream from a fixed random bigram table (vocabulary 40).
"""

import argparse
import math

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["no-train-mode"], default=None)
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()
torch.manual_seed(0)

ntokens, bptt, batch_size = 40, 16, 16
bigram = torch.softmax(3 * torch.randn(ntokens, ntokens), dim=1)
stream = torch.zeros(12000, dtype=torch.long)
for i in range(1, len(stream)):
    stream[i] = torch.multinomial(bigram[stream[i - 1]], 1)


def batchify(d, bsz):
    n = d.size(0) // bsz
    return d[: n * bsz].view(bsz, -1).t().contiguous()  # (time, batch)


train_data, val_data = batchify(stream[:10000], batch_size), batchify(stream[10000:], batch_size)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=512):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(0)])


class TransformerModel(nn.Module):
    def __init__(self, ntoken, d_model=64, nhead=4, d_hid=128, nlayers=2, dropout=0.1):
        super().__init__()
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        layer = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.embedding = nn.Embedding(ntoken, d_model)
        self.d_model = d_model
        self.linear = nn.Linear(d_model, ntoken)

    def forward(self, src, src_mask):
        src = self.pos_encoder(self.embedding(src) * math.sqrt(self.d_model))
        return self.linear(self.transformer_encoder(src, src_mask))


model = TransformerModel(ntokens)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 20))
mask = nn.Transformer.generate_square_subsequent_mask(bptt)


def get_batch(source, i):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len].reshape(-1)


def evaluate(source):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, source.size(0) - 1 - bptt, bptt):
            data, targets = get_batch(source, i)
            total += criterion(model(data, mask).view(-1, ntokens), targets).item()
    return total / len(range(0, source.size(0) - 1 - bptt, bptt))


if args.bug == "no-train-mode":
    model.train()
for epoch in range(1, args.epochs + 1):
    if args.bug != "no-train-mode":
        model.train()
    for i in range(0, train_data.size(0) - 1 - bptt, bptt):
        data, targets = get_batch(train_data, i)
        optimizer.zero_grad()
        loss = criterion(model(data, mask).view(-1, ntokens), targets)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        scheduler.step()
    val_loss = evaluate(val_data)
    print(f"| end of epoch {epoch} | valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):8.2f}")
