"""A character-level GRU language model with truncated backpropagation through time, in the
style of the PyTorch char-RNN tutorials: the text is cut into batch_size streams, each batch
continues the streams of the one before, and the hidden state is carried across batches and
detached from the previous batch's graph. Adam, `clip_grad_norm_`, a sample drawn at the end.

Healthy as written. `--bug no-detach` carries the hidden state without `.detach()`: the second
batch's backward reaches into the first batch's graph, whose buffers are already freed, and
training stops with "Trying to backward through the graph a second time" (RUN009 crashed).

Synthetic text: sentences drawn from a small fixed grammar (vocabulary of 30 characters).
"""

import argparse
import random

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["no-detach"], default=None)
parser.add_argument("--epochs", type=int, default=2)
args = parser.parse_args()

random.seed(0)
torch.manual_seed(0)
subjects = ["the cat", "a dog", "my friend", "the old man", "her sister"]
verbs = ["sees", "likes", "walks past", "waits for", "talks to"]
objects = ["the river", "a red house", "the small boat", "an open door", "the garden"]
text = " ".join(
    f"{random.choice(subjects)} {random.choice(verbs)} {random.choice(objects)}." for _ in range(900)
)
chars = sorted(set(text))
index = {c: i for i, c in enumerate(chars)}
data = torch.tensor([index[c] for c in text])

batch_size, seq_len = 16, 32
streams = data[: data.size(0) // batch_size * batch_size].view(batch_size, -1)  # (batch, time)


class CharRNN(nn.Module):
    def __init__(self, vocab, embed=32, hidden=128, layers=2, dropout=0.1):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.gru = nn.GRU(embed, hidden, layers, batch_first=True, dropout=dropout)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x, hidden=None):
        out, hidden = self.gru(self.embed(x), hidden)
        return self.head(out), hidden


model = CharRNN(len(chars))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
criterion = nn.CrossEntropyLoss()
for epoch in range(args.epochs):
    model.train()
    hidden = None
    for step, start in enumerate(range(0, streams.size(1) - 1 - seq_len, seq_len)):
        inputs = streams[:, start : start + seq_len]
        targets = streams[:, start + 1 : start + 1 + seq_len]
        if hidden is not None and args.bug != "no-detach":
            hidden = hidden.detach()  # truncate backpropagation at the batch boundary
        optimizer.zero_grad()
        logits, hidden = model(inputs, hidden)
        loss = criterion(logits.reshape(-1, len(chars)), targets.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 10 == 0:
            print(f"epoch {epoch} step {step:3d} loss {loss.item():.3f}")

model.eval()
with torch.no_grad():
    x, h, sample = torch.tensor([[index["t"]]]), None, "t"
    for _ in range(60):
        logits, h = model(x, h)
        x = torch.multinomial(torch.softmax(logits[0, -1], dim=0), 1)[None]
        sample += chars[int(x)]
print(f"sample: {sample!r}")
