"""A word-level LSTM language model in the style of the PyTorch word_language_model example.

Healthy as written: SGD at lr 20 with `clip_grad_norm_(0.25)`, as the example trains.
`--bug scaled-lr` scales the learning rate with the batch size (20 x 16 = 320) and drops
the clipping line: within the first 5 steps the loss jumps about 100x and stays there;
after 28 steps the script reports perplexity with `math.exp(val_loss)`, which raises
OverflowError (RUN009 crashed, naming the loss divergence, TRN002, as its likely cause).

Synthetic corpus: a token stream from a fixed random bigram table (vocabulary 50).
"""

import argparse
import math

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["scaled-lr"], default=None)
parser.add_argument("--steps", type=int, default=28)
args = parser.parse_args()
lr = 20.0 * (16 if args.bug == "scaled-lr" else 1)

torch.manual_seed(0)
ntokens, bptt, batch_size = 50, 20, 16
bigram = torch.softmax(3 * torch.randn(ntokens, ntokens), dim=1)
stream = [0]
for _ in range(ntokens * 400):
    stream.append(int(torch.multinomial(bigram[stream[-1]], 1)))
data = torch.tensor(stream)


def batchify(d, bsz):
    n = d.size(0) // bsz
    return d[: n * bsz].view(bsz, -1).t().contiguous()


train_data, val_data = batchify(data[:16000], batch_size), batchify(data[16000:], batch_size)


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp=200, nhid=200, nlayers=2):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, x, hidden):
        output, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(output).view(-1, self.decoder.out_features), hidden


def repackage_hidden(h):
    return tuple(v.detach() for v in h)


model = RNNModel(ntokens)
criterion = nn.NLLLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=lr)
hidden = (torch.zeros(2, batch_size, 200), torch.zeros(2, batch_size, 200))
model.train()
for step, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
    if step == args.steps:
        break
    seq_len = min(bptt, train_data.size(0) - 1 - i)
    inputs, targets = train_data[i : i + seq_len], train_data[i + 1 : i + 1 + seq_len].reshape(-1)
    hidden = repackage_hidden(hidden)
    optimizer.zero_grad()
    output, hidden = model(inputs, hidden)
    loss = criterion(torch.log_softmax(output, dim=-1), targets)
    loss.backward()
    if args.bug != "scaled-lr":
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    optimizer.step()
    if step % 4 == 0:
        print(f"| step {step:3d} | loss {loss.item():8.2f}")

model.eval()
with torch.no_grad():
    h = (torch.zeros(2, batch_size, 200), torch.zeros(2, batch_size, 200))
    total = 0.0
    for i in range(0, val_data.size(0) - 1, bptt):
        seq_len = min(bptt, val_data.size(0) - 1 - i)
        out, h = model(val_data[i : i + seq_len], h)
        total += (
            seq_len
            * criterion(torch.log_softmax(out, -1), val_data[i + 1 : i + 1 + seq_len].reshape(-1)).item()
        )
val_loss = total / (val_data.size(0) - 1)
print(f"| end of training | valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):8.2f}")
